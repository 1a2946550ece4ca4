import HomewardCore
import Logging
import Metrics
import Synchronization

/// `--change-notices` must be the same on every relay of a cluster: a relay hearing only the subjects of the users it
/// follows misses every notice of a relay that publishes on `hw.changes` alone. Each heartbeat states its relay's mode
/// (`PresenceHeartbeat.noticesPerUser`); a heartbeat of another mode is counted
/// (`homeward_bus_notice_mode_mismatches_total`, about one a second per such relay while it runs) and logged as an
/// error once per relay and start (its epoch).
final class NoticeModeCheck: Sendable {
    private let publishesPerUser: Bool
    private let logger: Logger
    private let mismatches: Counter
    /// The relays (node and epoch) whose other mode was logged.
    private let logged = Mutex<Set<String>>([])

    init(publishesPerUser: Bool, logger: Logger, metrics: any MetricsFactory) {
        self.publishesPerUser = publishesPerUser
        self.logger = logger
        mismatches = Counter(label: "homeward_bus_notice_mode_mismatches_total", factory: metrics)
    }

    func heard(_ heartbeat: PresenceHeartbeat) {
        guard heartbeat.noticesPerUser != publishesPerUser else { return }
        mismatches.increment()
        guard logged.withLock({ $0.insert("\(heartbeat.node) \(heartbeat.epoch)").inserted }) else { return }
        logger.error("another relay publishes change notices otherwise: --change-notices must be the same on every relay", metadata: [
            "relay": "\(heartbeat.node)",
            "theirs": "\(Self.name(heartbeat.noticesPerUser))",
            "ours": "\(Self.name(publishesPerUser))",
        ])
    }

    private static func name(_ perUser: Bool) -> String { perUser ? "per-user" : "all" }
}
