import HomewardCore
import Logging
import Metrics
import Synchronization

/// `--change-notices` must be the same on every relay of a cluster: a relay hearing only the subjects of the users it
/// follows misses every notice of a relay that publishes on `hw.changes` alone. Each heartbeat states its relay's mode
/// (`PresenceHeartbeat.noticesPerUser`); a heartbeat of another mode is counted
/// (`homeward_bus_notice_mode_mismatches_total`, about one a second per such relay while it runs) and logged as an
/// error once per relay and start (its epoch).
///
/// A bus that reads only the subjects it follows (`readsEveryNotice` false) also makes the mismatch safe: it keeps the
/// relays it hears publishing on `hw.changes` alone (`unstampedPublishers`), reads `hw.changes` while there is one, and
/// takes from it only their notices (a relay publishing per user sends there an unstamped copy of what it stamps on the
/// followed subjects). A relay is dropped once its heartbeat says per user, a stamped notice of its comes (it restarted
/// so), or it was not heard for `PresenceMessage.expiry` (gone).
final class NoticeModeCheck: Sendable {
    private let publishesPerUser: Bool
    private let readsEveryNotice: Bool
    private let logger: Logger
    private let mismatches: Counter
    private struct State {
        /// The relays (node and epoch) whose other mode was logged.
        var logged = Set<String>()
        /// The relays heard publishing on `hw.changes` alone, and when each was last heard (milliseconds of uptime).
        var unstampedPublishers: [String: Int64] = [:]
    }
    private let state = Mutex(State())

    init(publishesPerUser: Bool, readsEveryNotice: Bool = true, logger: Logger, metrics: any MetricsFactory) {
        self.publishesPerUser = publishesPerUser
        self.readsEveryNotice = readsEveryNotice
        self.logger = logger
        mismatches = Counter(label: "homeward_bus_notice_mode_mismatches_total", factory: metrics)
    }

    /// Takes `heartbeat` (heard at `now`). Returns true when its relay publishes on `hw.changes` alone and this bus
    /// reads only followed subjects and did not count it among those relays: the bus must read `hw.changes` from now
    /// on, and the relay read back what it missed of that relay's before.
    func heard(_ heartbeat: PresenceHeartbeat, now: Int64) -> Bool {
        let readsForIt = !readsEveryNotice && !heartbeat.noticesPerUser
        let (new, logging) = state.withLock { state -> (Bool, Bool) in
            var new = false
            if readsForIt {
                new = state.unstampedPublishers.updateValue(now, forKey: heartbeat.node) == nil
            } else if !readsEveryNotice {
                state.unstampedPublishers[heartbeat.node] = nil
            }
            let mismatch = heartbeat.noticesPerUser != publishesPerUser
            return (new, mismatch && state.logged.insert("\(heartbeat.node) \(heartbeat.epoch)").inserted)
        }
        guard heartbeat.noticesPerUser != publishesPerUser else { return new }
        mismatches.increment()
        guard logging else { return new }
        let message: Logger.Message = readsForIt
            ? "another relay publishes change notices on hw.changes alone: --change-notices must be the same on every relay; reading hw.changes for that relay's notices (and reading back what was missed) until it is gone"
            : "another relay publishes change notices otherwise: --change-notices must be the same on every relay"
        logger.error(message, metadata: [
            "relay": "\(heartbeat.node)",
            "theirs": "\(Self.name(heartbeat.noticesPerUser))",
            "ours": "\(Self.name(publishesPerUser))",
        ])
        return new
    }

    /// Whether a notice on `hw.changes` from `node` is taken: only from a relay that publishes there alone.
    func takesUnstamped(from node: String) -> Bool {
        state.withLock { $0.unstampedPublishers[node] != nil }
    }

    /// A notice stamped by `node` came: it publishes per user (it restarted so), and its notices on `hw.changes` are
    /// copies from now on.
    func heardStamped(from node: String) {
        state.withLock { state in
            if !state.unstampedPublishers.isEmpty { state.unstampedPublishers[node] = nil }
        }
    }

    /// Forgets the relays publishing on `hw.changes` alone that were not heard for `PresenceMessage.expiry` before
    /// `now` (gone, as their users are); returns whether any is left.
    func forgetSilent(now: Int64) -> Bool {
        state.withLock { state in
            state.unstampedPublishers = state.unstampedPublishers.filter { now - $0.value < PresenceMessage.expiry }
            return !state.unstampedPublishers.isEmpty
        }
    }

    private static func name(_ perUser: Bool) -> String { perUser ? "per-user" : "all" }
}
