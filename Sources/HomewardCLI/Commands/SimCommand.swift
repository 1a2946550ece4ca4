import ArgumentParser
import HomewardClient
import HomewardProtocol

struct SimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sim",
        abstract: "Load-test a relay: W walkers, each followed by K watchers, sending at R Hz; report delivery and latency.",
        discussion: """
            Registers W x (K + 1) fresh users (names start with a random prefix), makes each walker \
            friends with its watchers, starts a session per walker and has the watchers accept it. \
            Walkers then send positions carrying a sequence number in `alt`; every delivery is matched \
            to its send, so lost, duplicated and reordered deliveries are counted exactly, and latency is \
            measured on this machine's monotonic clock. Exits 5 if any position or alarm was lost or \
            duplicated. Keep --rate within the relay's per-connection limit (100 requests/s by default).
            """)

    @OptionGroup var global: GlobalOptions
    @Option(name: [.customShort("w"), .long], help: "Walkers.") var walkers = 5
    @Option(name: [.customShort("k"), .long], help: "Watchers per walker.") var watchers = 2
    @Option(name: [.customShort("r"), .long], help: "Positions per second per walker.") var rate: Double = 1
    @Option(name: [.customShort("d"), .long], help: "Seconds of walking.") var duration: Double = 10
    @Option(name: [.customShort("a"), .long], help: "Panic alarms to raise during the run (spread over time and walkers).") var alarms = 0
    @Option(help: "Username prefix (default: a random one, so runs do not collide).") var prefix: String?
    @Option(help: "Seconds to wait for the last deliveries after the last send.") var drainTimeout: Double = 10
    @Option(help: "Connections and sign-ups set up at once.") var concurrency = 16

    func validate() throws {
        guard walkers >= 1, watchers >= 1 else { throw ValidationError("--walkers and --watchers must be at least 1") }
        guard rate > 0, rate <= 50 else { throw ValidationError("--rate must be in (0, 50] Hz: the relay limits each connection to 100 requests/s") }
        guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be positive") }
        guard alarms >= 0 else { throw ValidationError("--alarms must be 0 or more") }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        if let prefix {
            let longest = "\(prefix)w\(walkers - 1)o\(watchers - 1)"
            guard (try? Username.normalize(longest)) == longest else {
                throw ValidationError("--prefix must make valid usernames (a-z 0-9 _ . -, at most 32 characters in all, e.g. \(longest))")
            }
        }
    }

    func run() async throws {
        let console = Console(json: global.json)
        let profile = try ProfileStore().load(global.profileName)
        let connection = try CommandContext.resolveConnection(global, profile: profile)
        let configuration = RelayClientConfiguration(
            endpoint: connection.endpoint, trust: connection.trust,
            reconnect: ReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(5)),
            requestTimeout: .seconds(120))
        let plan = SimulationPlan(walkers: walkers, watchersPerWalker: watchers, rate: rate, duration: duration, alarms: alarms,
                                  prefix: prefix ?? SimulationPlan.randomPrefix(),
                                  password: "sim-" + SimulationPlan.randomPrefix() + SimulationPlan.randomPrefix(),
                                  drainTimeout: drainTimeout, setupConcurrency: concurrency)
        console.note("simulating \(walkers) walkers x \(watchers) watchers at \(rate) Hz for \(duration) s against \(connection.endpoint.url) (users \(plan.prefix)*)")
        let report = try await SimulationRunner(plan: plan, configuration: configuration, console: console).run()
        console.emit(report.text, json: report.json)
        if !report.isClean {
            throw CLIError(code: "sim", message: "\(report.lost) lost and \(report.totals.duplicates) duplicated position deliveries, \(report.alarmsLost) lost alarms",
                           exitCode: CLIError.Status.simulationFailed)
        }
    }
}
