import CoreMetrics
import HomewardProtocol
import Synchronization

/// The edge's metrics, created once per relay from its own factory so that several relays
/// (as in tests) never share counters.
final class RelayMetrics: Sendable {
    let factory: any MetricsFactory
    let connections: Meter
    let fanoutLatency: Timer
    /// Connections closed right after accept because their address holds too many unauthenticated ones.
    let refusedConnections: Counter
    private let messagesIn = Mutex<[String: Counter]>([:])
    private let messagesOut = Mutex<[String: Counter]>([:])
    private let errors = Mutex<[String: Counter]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
        connections = Meter(label: "homeward_connections", factory: factory)
        fanoutLatency = Timer(label: "homeward_fanout_latency_seconds", factory: factory)
        refusedConnections = Counter(label: "homeward_connections_refused_total", factory: factory)
    }

    /// Unknown request types are counted under one label so a client cannot grow the label set.
    func received(_ type: String) {
        counter(in: messagesIn, "homeward_messages_in_total", type: RequestTypes.known.contains(type) ? type : "other").increment()
    }

    func sent(_ type: String, count: Int = 1) {
        counter(in: messagesOut, "homeward_messages_out_total", type: type).increment(by: count)
    }

    func error(_ code: ErrorCode) {
        let counter = errors.withLock { counters in
            if let counter = counters[code.rawValue] { return counter }
            let counter = Counter(label: "homeward_errors_total", dimensions: [("code", code.rawValue)], factory: factory)
            counters[code.rawValue] = counter
            return counter
        }
        counter.increment()
    }

    private func counter(in table: borrowing Mutex<[String: Counter]>, _ label: String, type: String) -> Counter {
        table.withLock { counters in
            if let counter = counters[type] { return counter }
            let counter = Counter(label: label, dimensions: [("type", type)], factory: factory)
            counters[type] = counter
            return counter
        }
    }
}

enum RequestTypes {
    static let known: Set<String> = [
        "register", "login", "hello", "logout", "friend.request", "friend.accept", "friend.decline", "friend.remove",
        "friend.list", "user.search", "session.start", "session.invite", "session.accept", "session.decline",
        "session.leave", "session.end", "session.list", "pos", "alarm.raise", "alarm.ack", "alarm.cancel",
        "alarm.contacts", "ping",
    ]
}
