import ArgumentParser
import Foundation
import HomewardBench
import NIOCore

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homeward-bench",
        abstract: "Fan-out, idle-capacity, connect-storm and alarm benchmarks: Homeward side by side with nats-server and mosquitto; writes: Homeward on SQLite, PostgreSQL and three relays.",
        discussion: """
            Build first: swift build -c release --product homeward-relay && swift build -c release --product homeward-bench
            Peers (nats-server, mosquitto) are installed if missing and started by bench/peers.sh, on loopback, with TLS.
            """,
        subcommands: [Fanout.self, Idle.self, Storm.self, Alarm.self, Writes.self, All.self, Smoke.self, Codec.self])
}

struct CommonOptions: ParsableArguments {
    @Option(help: "homeward, homeward-openssl and homeward-nio-ssl (one relay on that TLS library, --tls-backend), homeward-pg (one relay on PostgreSQL), homeward-cluster (three relays on PostgreSQL and NATS), nats, mosquitto, all (homeward, nats, mosquitto; for writes: the three homeward ones), or a comma-separated list. [default: all; smoke: homeward, the only one it runs]")
    var broker: String?

    @Flag(help: "Print the report as JSON instead of Markdown tables.")
    var json = false

    @Option(help: "Also write the Markdown report to this file.")
    var output: String?

    @Option(name: .customLong("relay-binary"), help: "homeward-relay to start. [default: the one beside this tool]")
    var relayBinary: String?

    @Option(name: .customLong("relay-arg"), parsing: .singleValue, help: "Extra argument for homeward-relay (repeatable).")
    var relayArguments: [String] = []

    @Option(name: .customLong("relay-log-dir"), help: "Keep each relay's log in this directory (BROKER-N.log) when the run ends. [default: removed with the relay's data directory]")
    var relayLogDirectory: String?

    @Option(name: .customLong("homeward-port"), help: "Loopback port for the relay the tool starts.")
    var homewardPort = 18443

    @Option(name: .customLong("cluster-ports"), help: "Loopback ports of the homeward-cluster relays, comma-separated; walkers on the first, observers on the others.")
    var clusterPorts = "18445,18446,18447"

    @Option(name: .customLong("peers-script"), help: "Script that installs, configures, starts and stops the peers.")
    var peersScript = "bench/peers.sh"

    @Option(help: "Event-loop threads of the load generator.")
    var threads = 2

    @Option(name: .customLong("source-addresses"), help: "Client source addresses 127.0.0.1...127.0.0.N, used round-robin.")
    var sourceAddresses = 4

    /// No --broker, or --broker all.
    var allBrokers: Bool { (broker ?? "all") == "all" }

    var brokers: [String] {
        guard let broker, !allBrokers else { return ["homeward", "nats", "mosquitto"] }
        return broker.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }
    }

    /// Checked before anything starts: an unknown broker would otherwise reach bench/peers.sh, and no event-loop
    /// thread would trap in NIO.
    func validate() throws {
        let unknown = brokers.filter { !BenchRun.brokerNames.contains($0) }
        guard unknown.isEmpty else {
            throw ValidationError("unknown broker \(unknown.joined(separator: ", ")); use \(BenchRun.brokerNames.joined(separator: ", ")) or all")
        }
        guard (1...256).contains(threads) else { throw ValidationError("--threads must be 1 to 256") }
        guard (1...254).contains(sourceAddresses) else { throw ValidationError("--source-addresses must be 1 to 254") }
        guard (1...65535).contains(homewardPort) else { throw ValidationError("--homeward-port must be 1 to 65535") }
    }

    func runOptions(brokers override: [String]? = nil) throws -> BenchRun.Options {
        var options = BenchRun.Options()
        options.clusterPorts = try parseList(clusterPorts)
        guard options.clusterPorts.count >= 2 else { throw ValidationError("--cluster-ports needs at least two ports") }
        options.brokers = override ?? brokers
        options.relayBinary = relayBinary
        options.relayArguments = relayArguments
        options.relayLogDirectory = relayLogDirectory
        options.homewardPort = homewardPort
        options.peersScript = peersScript
        options.threads = threads
        options.sourceAddresses = sourceAddresses
        return options
    }

    /// Starts the brokers, runs `body`, stops the brokers, prints the report.
    func run(brokers override: [String]? = nil, postgresDelay: TimeAmount? = nil,
             _ body: (BenchRun, inout BenchReport) async throws -> Void) async throws {
        var options = try runOptions(brokers: override)
        options.postgresDelay = postgresDelay
        let run = try BenchRun(options)
        var report = BenchReport(brokers: options.brokers, command: CommandLine.arguments.joined(separator: " "))
        do {
            try await run.start()
            try await body(run, &report)
        } catch {
            run.stop()
            throw error
        }
        run.stop()
        let markdown = report.markdown
        print(json ? report.json : markdown)
        if let output { try markdown.write(toFile: output, atomically: true, encoding: .utf8) }
    }
}

func parseList<T: LosslessStringConvertible>(_ text: String) throws -> [T] {
    try text.split(separator: ",").map {
        guard let value = T(String($0).trimmingCharacters(in: .whitespaces)) else { throw ValidationError("bad list item '\($0)'") }
        return value
    }
}

/// A comma-separated list of counts or rates, each positive: none would leave a scenario nothing to measure.
func parsePositiveList<T: LosslessStringConvertible & Comparable & Numeric>(_ text: String, _ option: String) throws -> [T] {
    let values: [T] = try parseList(text)
    guard !values.isEmpty, values.allSatisfy({ $0 > 0 }) else {
        throw ValidationError("\(option) must list positive numbers, comma-separated")
    }
    return values
}

/// `value` of `option` when positive: 0 runs a scenario on nothing and reports nonsense (or traps).
func requirePositive<T: Comparable & Numeric>(_ value: T, _ option: String) throws {
    guard value > 0 else { throw ValidationError("\(option) must be more than 0") }
}

struct FanoutOptions: ParsableArguments {
    @Option(help: "Walkers (publishers).")
    var walkers = 50
    @Option(help: "Observers per walker.")
    var observers = 10
    @Option(help: "Walker rates to ramp through, Hz, comma-separated; the ramp stops at saturation.")
    var rates = "5,10,20,40,80,160,320"
    @Option(name: .customLong("step-seconds"), help: "Seconds per ramp step.")
    var stepSeconds = 3.0
    @Flag(help: "A few seconds: 4 walkers x 3 observers at 5 and 20 Hz, 1 s steps.")
    var quick = false

    func validate() throws {
        try requirePositive(walkers, "--walkers")
        try requirePositive(observers, "--observers")
        try requirePositive(stepSeconds, "--step-seconds")
        let _: [Double] = try parsePositiveList(rates, "--rates")
    }

    func config() throws -> FanoutConfig {
        var config = FanoutConfig()
        if quick {
            config.walkers = 4
            config.observers = 3
            config.rates = [5, 20]
            config.stepSeconds = 1
            return config
        }
        config.walkers = walkers
        config.observers = observers
        config.rates = try parsePositiveList(rates, "--rates")
        config.stepSeconds = stepSeconds
        return config
    }
}

struct WritesOptions: ParsableArguments {
    @Option(help: "Disjoint pairs of friends; each user writes with one request in flight.")
    var pairs = 24
    @Option(help: "Seconds of writes.")
    var duration = 15.0
    @Option(name: .customLong("read-seconds"), help: "Seconds of friend.list reads after the writes (0: none).")
    var readSeconds = 5.0
    @Option(name: .customLong("pg-delay-ms"), help: "Milliseconds the proxy in front of PostgreSQL adds each way.")
    var pgDelayMs = 1.0

    func validate() throws {
        try requirePositive(pairs, "--pairs")
        try requirePositive(duration, "--duration")
        guard readSeconds >= 0, pgDelayMs >= 0 else { throw ValidationError("--read-seconds and --pg-delay-ms must be at least 0") }
    }

    func config() -> WritesConfig {
        var config = WritesConfig()
        config.pairs = pairs
        config.seconds = duration
        config.readSeconds = readSeconds
        return config
    }
}

struct IdleOptions: ParsableArguments {
    @Option(help: "Idle connection counts to measure at, comma-separated.")
    var counts = "1000,10000,19500"

    func validate() throws { let _: [Int] = try parsePositiveList(counts, "--counts") }
}

struct StormOptions: ParsableArguments {
    @Option(help: "Connections to open, authenticate and close.")
    var connections = 2000
    @Option(help: "Connection attempts in flight at once.")
    var concurrency = 64

    func validate() throws {
        try requirePositive(connections, "--connections")
        try requirePositive(concurrency, "--concurrency")
    }
}

struct AlarmOptions: ParsableArguments {
    @Option(help: "Recipient counts K, comma-separated.")
    var recipients = "1,10,100"
    @Option(help: "Alarms raised per K.")
    var raises = 20

    func validate() throws {
        let _: [Int] = try parsePositiveList(recipients, "--recipients")
        try requirePositive(raises, "--raises")
    }
}

extension BenchCommand {
    struct Fanout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "W walkers each followed by K observers; ramp the rate to saturation.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var fanout: FanoutOptions

        func run() async throws {
            let config = try fanout.config()
            try await common.run(brokers: fanout.quick && common.allBrokers ? ["homeward"] : nil) { run, report in
                report.fanoutConfig = config
                for driver in run.drivers { report.fanout.append(try await FanoutScenario.run(driver, config)) }
            }
        }
    }

    struct Idle: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resident memory per authenticated idle TLS WebSocket connection.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var idle: IdleOptions

        func run() async throws {
            let counts: [Int] = try parsePositiveList(idle.counts, "--counts")
            try await common.run { run, report in
                for driver in run.drivers { report.idle.append(try await IdleScenario.run(driver, env: run.env, counts: counts)) }
            }
        }
    }

    struct Storm: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "TLS handshake + upgrade + authentication per second.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var storm: StormOptions

        func run() async throws {
            try await common.run { run, report in
                for driver in run.drivers {
                    report.storm.append(try await StormScenario.run(driver, env: run.env, connections: storm.connections,
                                                                    concurrency: storm.concurrency))
                }
            }
        }
    }

    struct Alarm: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Time from raise until every online recipient has the alarm.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var alarm: AlarmOptions

        func run() async throws {
            let recipients: [Int] = try parsePositiveList(alarm.recipients, "--recipients")
            try await common.run { run, report in
                for driver in run.drivers {
                    report.alarm.append(try await AlarmScenario.run(driver, recipients: recipients, raises: alarm.raises))
                }
            }
        }
    }

    struct Writes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disjoint pairs of friends writing (session.start/end, location.pause/resume) as fast as acknowledged, then reading friend.list.",
            discussion: """
                Brokers: homeward (one relay, SQLite), homeward-pg (one relay, PostgreSQL) and homeward-cluster (three \
                relays, PostgreSQL + NATS), by default all three in one run. PostgreSQL is reached through a TCP proxy in \
                this tool that adds --pg-delay-ms each way (as a database in another rack or zone) and counts the \
                statements it forwards.
                """)
        @OptionGroup var common: CommonOptions
        @OptionGroup var writes: WritesOptions

        func run() async throws {
            let config = writes.config()
            let brokers = common.allBrokers ? ["homeward", "homeward-pg", "homeward-cluster"] : common.brokers
            guard brokers.allSatisfy({ $0.hasPrefix("homeward") }) else { throw ValidationError("writes runs only homeward brokers") }
            try await common.run(brokers: brokers, postgresDelay: .microseconds(Int64(writes.pgDelayMs * 1000))) { run, report in
                report.writesConfig = config
                report.writesDelayMs = writes.pgDelayMs
                for driver in run.drivers {
                    guard let homeward = driver as? HomewardDriver else { continue }
                    report.writes.append(try await WritesScenario.run(homeward, config,
                                                                      proxy: homeward.name == "homeward" ? nil : run.postgresProxy))
                }
            }
        }
    }

    struct All: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every scenario, every broker, one run.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var fanout: FanoutOptions
        @OptionGroup var idle: IdleOptions
        @OptionGroup var storm: StormOptions
        @OptionGroup var alarm: AlarmOptions

        func run() async throws {
            let config = try fanout.config()
            let counts: [Int] = try parsePositiveList(idle.counts, "--counts")
            let recipients: [Int] = try parsePositiveList(alarm.recipients, "--recipients")
            try await common.run { run, report in
                report.fanoutConfig = config
                for driver in run.drivers { report.fanout.append(try await FanoutScenario.run(driver, config)) }
                for driver in run.drivers {
                    report.alarm.append(try await AlarmScenario.run(driver, recipients: recipients, raises: alarm.raises))
                }
                for driver in run.drivers {
                    report.storm.append(try await StormScenario.run(driver, env: run.env, connections: storm.connections,
                                                                    concurrency: storm.concurrency))
                }
                for driver in run.drivers { report.idle.append(try await IdleScenario.run(driver, env: run.env, counts: counts)) }
            }
        }
    }

    struct Smoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A few seconds against Homeward only, every scenario tiny; fails if anything was not delivered. For CI.")
        @OptionGroup var common: CommonOptions

        /// The smoke runs one relay on SQLite: any other --broker would be ignored, so it is refused.
        func validate() throws {
            if let broker = common.broker, broker != "homeward" {
                throw ValidationError("smoke runs Homeward only; leave out --broker (or give --broker homeward), not --broker \(broker)")
            }
        }

        func run() async throws {
            var config = FanoutConfig()
            config.walkers = 4
            config.observers = 3
            config.rates = [5, 20]
            config.stepSeconds = 1
            var failures: [String] = []
            try await common.run(brokers: ["homeward"]) { run, report in
                let driver = run.drivers[0]
                report.fanoutConfig = config
                let fanout = try await FanoutScenario.run(driver, config)
                report.fanout.append(fanout)
                if fanout.best.deliveredPerSecond <= 0 { failures.append("fan-out delivered nothing") }
                if fanout.steps.first.map({ $0.lost > 0 }) ?? true { failures.append("fan-out lost deliveries at 5 Hz") }
                let alarm = try await AlarmScenario.run(driver, recipients: [1, 5], raises: 3)
                report.alarm.append(alarm)
                if alarm.points.contains(where: { $0.incomplete > 0 }) { failures.append("an alarm did not reach every recipient") }
                let storm = try await StormScenario.run(driver, env: run.env, connections: 100, concurrency: 16)
                report.storm.append(storm)
                if storm.failed > 0 { failures.append("\(storm.failed) storm connections failed") }
                let idle = try await IdleScenario.run(driver, env: run.env, counts: [200])
                report.idle.append(idle)
                if idle.failed > 0 { failures.append("\(idle.failed) idle connections failed") }
                if let homeward = driver as? HomewardDriver {
                    var writes = WritesConfig()
                    writes.pairs = 2
                    writes.seconds = 1
                    writes.readSeconds = 0.5
                    report.writesConfig = writes
                    let result = try await WritesScenario.run(homeward, writes, proxy: nil)
                    report.writes.append(result)
                    if result.acknowledged == 0 || !result.errors.isEmpty || !result.readErrors.isEmpty {
                        failures.append("writes: \(result.acknowledged) acknowledged, errors \(result.errors) \(result.readErrors)")
                    }
                }
            }
            if !failures.isEmpty {
                FileHandle.standardError.write(Data("smoke FAILED: \(failures.joined(separator: "; "))\n".utf8))
                throw ExitCode.failure
            }
            print("smoke: 1 passed, 0 failed")
        }
    }
}
