import Foundation
import NIOCore
import NIOPosix

/// Starts the brokers a run needs and stops them afterwards.
///
/// Homeward is started from the `homeward-relay` binary (by default the one beside this tool) with a
/// temporary data directory. nats-server and mosquitto are installed (if missing), given TLS
/// certificates and configs, and started on loopback by `bench/peers.sh`. `homeward-cluster` is three relays
/// (`--node-id n1...n3`) on the PostgreSQL and bus nats-server that `bench/peers.sh start DIR cluster` starts.
///
/// Not `Sendable`: the command's one task owns a run from `start` to `stop`, and the compiler keeps it there.
/// What the scenarios share across tasks (the drivers, the environment) is `Sendable` itself.
public final class BenchRun {
    public struct Options: Sendable {
        public var brokers: [String] = ["homeward", "nats", "mosquitto"]
        public var relayBinary: String?
        public var relayArguments: [String] = []
        public var peersScript = "bench/peers.sh"
        public var threads = 2
        public var sourceAddresses = 4
        public var homewardPort = 18443
        public var natsPort = 18444
        public var mosquittoPort = 18883
        /// Ports of the homeward-cluster relays; walkers go to the first, observers to the others.
        public var clusterPorts = [18445, 18446, 18447]
        /// What bench/peers.sh gives the cluster (its PG_PORT and BUS_PORT defaults).
        public var clusterBus = "nats://127.0.0.1:14223"
        /// PostgreSQL's port (bench/peers.sh's PG_PORT), and the port of `homeward-pg`: one relay on PostgreSQL,
        /// on a database of its own (`homeward_one`).
        public var postgresPort = 15432
        public var postgresRelayPort = 18448
        /// When set, the relays reach PostgreSQL through a `DelayProxy` on `postgresProxyPort` that adds this
        /// much each way.
        public var postgresDelay: TimeAmount?
        public var postgresProxyPort = 15433
        /// Ports of `homeward-openssl` and `homeward-nio-ssl`: one relay each, on the TLS library the name says
        /// (`--tls-backend`), so that one run compares the two.
        public var tlsBackendPorts = ["openssl": 18451, "nio-ssl": 18452]
        /// Where each relay's log is kept when the run ends (as BROKER-N.log); nil: removed with its data directory.
        public var relayLogDirectory: String?
        public init() {}
    }

    /// The brokers a run can start (`all` is the command's shorthand for some of them).
    public static let brokerNames = ["homeward", "homeward-openssl", "homeward-nio-ssl", "homeward-pg", "homeward-cluster", "nats", "mosquitto"]

    public let options: Options
    public let env: BenchEnvironment
    public private(set) var drivers: [any BrokerDriver] = []
    private var homewards: [HomewardDriver] = []
    private var peersDirectory: String?
    /// Between the relays and PostgreSQL, with `postgresDelay`; on an event loop of its own.
    public private(set) var postgresProxy: DelayProxy?
    private var proxyGroup: MultiThreadedEventLoopGroup?

    public init(_ options: Options) throws {
        self.options = options
        let limit = SystemInfo.raiseOpenFileLimit(to: 200_000)
        log("open-file limit \(limit)")
        env = try BenchEnvironment(threads: options.threads,
                                   sources: (1...max(1, options.sourceAddresses)).map { "127.0.0.\($0)" })
    }

    static func defaultRelayBinary() -> String {
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let beside = me.deletingLastPathComponent().appendingPathComponent("homeward-relay").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        if let exe = Bundle.main.executableURL?.deletingLastPathComponent().appendingPathComponent("homeward-relay").path {
            return exe
        }
        return beside
    }

    public func start() async throws {
        let peers = Array(Set(options.brokers.filter { $0 != "homeward" && Self.tlsBackend(of: $0) == nil }
            .map { $0 == "homeward-cluster" || $0 == "homeward-pg" ? "cluster" : $0 })).sorted()
        if !peers.isEmpty {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-bench-peers-\(getpid())").path
            peersDirectory = directory
            log("starting \(peers.joined(separator: ", ")) with \(options.peersScript)")
            _ = try runScript(options.peersScript, ["start", directory] + peers)
        }
        var postgresPort = options.postgresPort
        if let delay = options.postgresDelay, peers.contains("cluster") {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            proxyGroup = group
            let proxy = try await DelayProxy.start(group: group, port: options.postgresProxyPort, target: options.postgresPort, delay: delay)
            postgresProxy = proxy
            postgresPort = proxy.port
            log("PostgreSQL through a proxy on 127.0.0.1:\(proxy.port), \(delay.nanoseconds / 1000) µs each way")
        }
        func store(_ database: String) -> String {
            "postgres://postgres@127.0.0.1:\(postgresPort)/\(database)?sslmode=disable"
        }
        for name in options.brokers {
            if let backend = Self.tlsBackend(of: name), let port = options.tlsBackendPorts[backend] {
                let driver = try HomewardDriver(name: name, env: env, binary: options.relayBinary ?? Self.defaultRelayBinary(),
                                                nodes: [(port: port, arguments: ["--tls-backend", backend] + options.relayArguments)])
                homewards.append(driver)
                try await driver.waitUntilReady()
                drivers.append(driver)
                continue
            }
            switch name {
            case "homeward-pg":
                let helpers = [("PostgreSQL", readPID("pg/data/postmaster"))].compactMap { name, pid in pid.map { (name: name, pid: $0) } }
                let driver = try HomewardDriver(name: name, env: env, binary: options.relayBinary ?? Self.defaultRelayBinary(),
                                                nodes: [(port: options.postgresRelayPort,
                                                         arguments: ["--store", store("homeward_one")] + options.relayArguments)],
                                                helpers: helpers)
                homewards.append(driver)
                try await driver.waitUntilReady()
                drivers.append(driver)
            case "homeward":
                let driver = try HomewardDriver(env: env, binary: options.relayBinary ?? Self.defaultRelayBinary(),
                                                port: options.homewardPort, extraArguments: options.relayArguments)
                homewards.append(driver)
                try await driver.waitUntilReady()
                drivers.append(driver)
            case "homeward-cluster":
                let nodes = options.clusterPorts.enumerated().map { index, port in
                    (port: port, arguments: ["--store", store("homeward"), "--bus", options.clusterBus,
                                             "--node-id", "n\(index + 1)"] + options.relayArguments)
                }
                let helpers = [("nats-server (bus)", readPID("bus")), ("PostgreSQL", readPID("pg/data/postmaster"))]
                    .compactMap { name, pid in pid.map { (name: name, pid: $0) } }
                let driver = try HomewardDriver(name: name, env: env, binary: options.relayBinary ?? Self.defaultRelayBinary(),
                                                nodes: nodes, helpers: helpers)
                homewards.append(driver)
                try await driver.waitUntilReady()
                drivers.append(driver)
            case "nats":
                try await waitForPort(env, port: options.natsPort, timeout: 30)
                drivers.append(NATSDriver(env: env, port: options.natsPort, pid: readPID("nats")))
            case "mosquitto":
                try await waitForPort(env, port: options.mosquittoPort, timeout: 30)
                drivers.append(MQTTDriver(env: env, port: options.mosquittoPort, pid: readPID("mosquitto")))
            default:
                throw BenchError.failed("unknown broker \(name); use \(Self.brokerNames.joined(separator: ", ")) or all")
            }
        }
        log("brokers up: \(drivers.map { "\($0.name) (pid \($0.pid.map(String.init) ?? "?"))" }.joined(separator: ", "))")
    }

    /// The relay's TLS library of a `homeward-openssl` or `homeward-nio-ssl` broker, nil for other names.
    static func tlsBackend(of broker: String) -> String? {
        switch broker {
        case "homeward-openssl": return "openssl"
        case "homeward-nio-ssl": return "nio-ssl"
        default: return nil
        }
    }

    private func readPID(_ name: String) -> Int32? {
        guard let directory = peersDirectory,
              let text = try? String(contentsOfFile: "\(directory)/\(name).pid", encoding: .utf8),
              let first = text.split(separator: "\n").first else { return nil }  // postmaster.pid: the pid, then more lines
        return Int32(first.trimmingCharacters(in: .whitespaces))
    }

    public func stop() {
        for driver in homewards { driver.stop(keepingLogsIn: options.relayLogDirectory) }
        if let proxyGroup {
            try? proxyGroup.syncShutdownGracefully()
            self.proxyGroup = nil
            postgresProxy = nil
        }
        if let directory = peersDirectory {
            _ = try? runScript(options.peersScript, ["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
        }
        try? env.group.syncShutdownGracefully()
    }
}
