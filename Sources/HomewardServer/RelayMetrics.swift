import CoreMetrics
import HomewardProtocol

/// The edge's metrics, created once per relay from its own factory so that several relays
/// (as in tests) never share counters.
///
/// Every counter exists from the start, in dictionaries that never change afterwards: counting a
/// message is a dictionary read and an atomic add, no lock (a position is counted on every event
/// loop, and the presence shard must stay the only lock it takes).
final class RelayMetrics: Sendable {
    let factory: any MetricsFactory
    let connections: Meter
    /// Sampled, and reported once a second per loop: see `ConnectionLoop.recordFanoutLatency`.
    let fanoutLatency: Timer
    /// Connections closed right after accept because their address holds too many unauthenticated ones.
    let refusedConnections: Counter
    private let messagesIn: [String: Counter]
    private let messagesOut: [String: Counter]
    private let errors: [ErrorCode: Counter]

    /// The label for types outside the lists: a client cannot grow the label set.
    static let other = "other"

    init(factory: any MetricsFactory) {
        self.factory = factory
        connections = Meter(label: "homeward_connections", factory: factory)
        fanoutLatency = Timer(label: "homeward_fanout_latency_seconds", factory: factory)
        refusedConnections = Counter(label: "homeward_connections_refused_total", factory: factory)
        func counters(_ label: String, _ types: [String]) -> [String: Counter] {
            Dictionary(uniqueKeysWithValues: Set(types + [Self.other]).map {
                ($0, Counter(label: label, dimensions: [("type", $0)], factory: factory))
            })
        }
        messagesIn = counters("homeward_messages_in_total", MessageTypes.requests + ["binary"])
        messagesOut = counters("homeward_messages_out_total", MessageTypes.outgoing)
        errors = Dictionary(uniqueKeysWithValues: ErrorCode.allCases.map {
            ($0, Counter(label: "homeward_errors_total", dimensions: [("code", $0.rawValue)], factory: factory))
        })
    }

    func received(_ type: String) {
        (messagesIn[type] ?? messagesIn[Self.other]!).increment()
    }

    func sent(_ type: String, count: Int = 1) {
        (messagesOut[type] ?? messagesOut[Self.other]!).increment(by: count)
    }

    func error(_ code: ErrorCode) {
        errors[code]!.increment()
    }
}
