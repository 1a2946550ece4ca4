import NIOCore

/// How a `NATSClient` connects, keeps its connection alive and comes back after losing it.
public struct NATSClientConfiguration: Sendable {
    /// Sent in CONNECT as `name`; shows in the server's monitoring.
    public var name: String?
    /// TCP connect plus INFO/CONNECT/PONG handshake, per attempt.
    public var connectTimeout: TimeAmount = .seconds(5)
    /// A PING of our own this often; the server's PINGs are answered whenever they come.
    public var pingInterval: TimeAmount = .seconds(30)
    /// Pings without a PONG before the connection counts as stale and is dropped.
    public var maxPingsOutstanding = 2
    public var reconnect = NATSReconnectBackoff()
    /// Reconnect attempts after a loss before the client closes itself; nil tries until `close()`.
    public var maxReconnectAttempts: Int?
    /// Bytes of publishes kept while reconnecting; beyond it `publish` throws `reconnectBufferFull`.
    public var reconnectBufferLimit = 8 * 1024 * 1024
    /// Messages each subscription keeps for a consumer that is behind; see `NATSSubscription`.
    public var subscriptionBufferLimit = 65_536
    /// Whether the server sends this client the messages it published itself to subjects it subscribes to
    /// (CONNECT `echo`). A relay turns it off: it has already delivered its own messages.
    public var echo = true
    /// `publishDetached` writes at most once per this interval: a message handed over sooner after the last
    /// write waits for the rest of it, and goes with everything handed over meanwhile in one `write(2)`; one handed
    /// over later goes at once. Zero: each goes at once (as many as arrive during one turn of the loop in one write).
    /// Anything else the client sends (a publish, a request, a flush, a subscription) first writes what waits,
    /// so the wire keeps the order of the calls.
    public var detachedWriteInterval: TimeAmount = .zero
    /// How long `close()` waits for the server to confirm what was written (one PING round trip).
    public var closeFlushTimeout: TimeAmount = .seconds(2)

    public init(name: String? = nil) {
        self.name = name
    }
}

/// Capped exponential backoff between reconnect attempts, with jitter so that many relays that lost
/// the same server do not all come back in the same millisecond.
public struct NATSReconnectBackoff: Sendable, Equatable {
    public var firstDelay: TimeAmount = .milliseconds(100)
    public var maximumDelay: TimeAmount = .seconds(2)
    /// Up to this fraction of each delay is taken off at random.
    public var jitter = 0.2

    public init(firstDelay: TimeAmount = .milliseconds(100), maximumDelay: TimeAmount = .seconds(2), jitter: Double = 0.2) {
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.jitter = min(max(jitter, 0), 1)
    }

    /// The wait before reconnect attempt `attempt` (0 = first after the loss); `random` in [0, 1].
    public func delay(attempt: Int, random: Double) -> TimeAmount {
        var nanoseconds = firstDelay.nanoseconds
        for _ in 0..<min(attempt, 40) where nanoseconds < maximumDelay.nanoseconds { nanoseconds *= 2 }
        let capped = Double(min(nanoseconds, maximumDelay.nanoseconds))
        return .nanoseconds(Int64(capped * (1 - jitter * min(max(random, 0), 1))))
    }
}
