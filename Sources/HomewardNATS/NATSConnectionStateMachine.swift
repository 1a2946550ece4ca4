import NIOCore

/// The protocol logic of a `NATSClient`, as a value: every input (bytes parsed from the server, a
/// socket that failed, a timer, a call of the public API) returns what `NATSClientCore` must do, and
/// no I/O happens in here, so unit tests drive it directly. (The shape follows postgres-nio's
/// `ConnectionStateMachine`: Homeward differs in keeping one connection that it replaces on loss,
/// instead of a pool, because NATS multiplexes everything over one socket.)
///
/// The machine also owns what must survive a reconnect: the live subscriptions (re-sent after every
/// handshake) and the publishes made while no connection was up.
struct NATSConnectionStateMachine {
    /// Every socket attempt gets a new id; events carrying an older id are from a connection that
    /// was already given up and are ignored.
    typealias ConnectionID = Int

    enum Phase: Equatable {
        /// Between attempts, until the retry timer fires (no socket).
        case waiting
        /// Socket opening or open, INFO not yet received.
        case awaitingInfo
        /// CONNECT and PING sent; the PONG confirms the server accepted CONNECT.
        case awaitingPong
    }

    struct Attempt: Equatable {
        /// Attempts made since the first connect or since the loss.
        var number: Int
        var server: Int
        var connection: ConnectionID
        var phase: Phase
    }

    enum State: Equatable {
        /// The first connection: each server once, then `connect` fails.
        case connecting(Attempt)
        case connected(connection: ConnectionID, server: Int, pingsOutstanding: Int)
        /// Lost after having been connected: retried with backoff until `close()` or the attempt limit.
        case reconnecting(Attempt)
        case closed
    }

    struct Subscription: Equatable {
        var id: UInt64
        var subject: String
        var queueGroup: String?
        /// Total messages after which the server drops the subscription (UNSUB with max).
        var maxMessages: Int?
        var delivered = 0
    }

    enum FailureAction: Equatable {
        /// An event of a connection already given up.
        case none
        /// First connect: try `server` right away.
        case open(server: Int, connection: ConnectionID)
        /// Reconnecting: the attempt failed; try again after the delay with this connection id.
        case retry(after: TimeAmount, connection: ConnectionID)
        /// The live connection broke: tell waiters and listeners, then retry after the delay.
        case lost(reason: String, retryAfter: TimeAmount, connection: ConnectionID)
        /// No more attempts: the client is closed with this error.
        case giveUp(NATSError)
    }

    enum PongAction: Equatable {
        case none
        /// The handshake is complete: re-send every subscription, then the buffered publishes in order.
        case connected(server: Int, resubscribe: [Subscription], buffered: [ByteBuffer], isReconnect: Bool)
        /// The answer to one of our PINGs (keepalive or `flush`), in the order they were sent.
        case pong
    }

    enum PublishAction: Equatable {
        case write
        case buffered
        case fail(NATSError)
    }

    enum KeepaliveAction: Equatable {
        case none
        case ping
        /// Too many PINGs unanswered: treat the connection as broken.
        case stale(ConnectionID)
    }

    private(set) var state: State
    private(set) var subscriptions: [UInt64: Subscription] = [:]
    /// Encoded PUBs made while no connection was up, sent right after the next handshake.
    private(set) var buffered: [ByteBuffer] = []
    private(set) var bufferedBytes = 0
    /// The latest INFO, for `max_payload`.
    private(set) var serverInfo: NATSServerInfo?

    private let serverCount: Int
    private let configuration: NATSClientConfiguration
    private var lastConnection: ConnectionID = 0
    private var hasConnected = false
    /// The reason the latest attempt failed, for the error `connect` throws.
    private var lastFailure = "no attempt made"

    init(serverCount: Int, configuration: NATSClientConfiguration) {
        precondition(serverCount > 0, "NATSClient checks for an empty URL list before creating the machine")
        self.serverCount = serverCount
        self.configuration = configuration
        state = .connecting(Attempt(number: 0, server: 0, connection: 0, phase: .waiting))
    }

    var isConnected: Bool {
        if case .connected = state { return true }
        return false
    }

    private mutating func newConnection() -> ConnectionID {
        lastConnection += 1
        return lastConnection
    }

    // MARK: Connecting

    mutating func start() -> FailureAction {
        let connection = newConnection()
        state = .connecting(Attempt(number: 0, server: 0, connection: connection, phase: .awaitingInfo))
        return .open(server: 0, connection: connection)
    }

    /// The retry delay passed: open the socket for the attempt that was waiting.
    mutating func retryTimerFired(connection: ConnectionID) -> FailureAction {
        guard case .reconnecting(var attempt) = state, attempt.phase == .waiting, attempt.connection == connection else { return .none }
        attempt.phase = .awaitingInfo
        state = .reconnecting(attempt)
        return .open(server: attempt.server, connection: connection)
    }

    /// INFO arrived. Returns the server index to send CONNECT and PING for, if it starts a handshake.
    mutating func infoReceived(_ info: NATSServerInfo, connection: ConnectionID) -> Int? {
        switch state {
        case .connecting(var attempt) where attempt.connection == connection && attempt.phase == .awaitingInfo:
            serverInfo = info
            attempt.phase = .awaitingPong
            state = .connecting(attempt)
            return attempt.server
        case .reconnecting(var attempt) where attempt.connection == connection && attempt.phase == .awaitingInfo:
            serverInfo = info
            attempt.phase = .awaitingPong
            state = .reconnecting(attempt)
            return attempt.server
        case .connected(connection, _, _):
            serverInfo = info // a later INFO (cluster change): nothing to do
            return nil
        default:
            return nil
        }
    }

    mutating func pongReceived(connection: ConnectionID) -> PongAction {
        switch state {
        case .connecting(let attempt), .reconnecting(let attempt):
            guard attempt.connection == connection, attempt.phase == .awaitingPong else { return .none }
            let isReconnect = hasConnected
            hasConnected = true
            state = .connected(connection: connection, server: attempt.server, pingsOutstanding: 0)
            let resubscribe = subscriptions.values.sorted { $0.id < $1.id }.map { subscription -> Subscription in
                // The server counts a max from the new SUB: it may only deliver what is left.
                var remaining = subscription
                remaining.maxMessages = subscription.maxMessages.map { $0 - subscription.delivered }
                return remaining
            }
            let publishes = buffered
            buffered = []
            bufferedBytes = 0
            return .connected(server: attempt.server, resubscribe: resubscribe, buffered: publishes, isReconnect: isReconnect)
        case .connected(connection, let server, let outstanding):
            state = .connected(connection: connection, server: server, pingsOutstanding: max(0, outstanding - 1))
            return .pong
        default:
            return .none
        }
    }

    /// Whether a PING on this connection should be answered.
    func isCurrent(_ connection: ConnectionID) -> Bool {
        switch state {
        case .connecting(let attempt), .reconnecting(let attempt): attempt.connection == connection && attempt.phase != .waiting
        case .connected(let current, _, _): current == connection
        case .closed: false
        }
    }

    /// `-ERR` from the server. During the handshake it means the server refused CONNECT (it closes
    /// the socket too); once connected the error is only logged, and a fatal one ends in a closed socket.
    mutating func serverErrorReceived(_ message: String, connection: ConnectionID) -> FailureAction {
        failHandshake(connection: connection, reason: "server error: \(message)")
    }

    /// The handshake of `connection` took longer than the connect timeout.
    mutating func handshakeTimedOut(connection: ConnectionID) -> FailureAction {
        failHandshake(connection: connection, reason: "handshake timed out")
    }

    /// Fails `connection` only while it is in its handshake.
    private mutating func failHandshake(connection: ConnectionID, reason: String) -> FailureAction {
        switch state {
        case .connecting(let attempt), .reconnecting(let attempt):
            guard attempt.connection == connection, attempt.phase != .waiting else { return .none }
            return connectionFailed(connection: connection, reason: reason)
        default:
            return .none
        }
    }

    /// The socket of `connection` failed to open, closed, or was found stale.
    mutating func connectionFailed(connection: ConnectionID, reason: String, random: Double = .random(in: 0...1)) -> FailureAction {
        switch state {
        case .connecting(let attempt):
            guard attempt.connection == connection, attempt.phase != .waiting else { return .none }
            lastFailure = reason
            guard attempt.number + 1 < serverCount else {
                state = .closed
                return .giveUp(.connectFailed(reason))
            }
            let next = newConnection()
            state = .connecting(Attempt(number: attempt.number + 1, server: attempt.server + 1, connection: next, phase: .awaitingInfo))
            return .open(server: attempt.server + 1, connection: next)
        case .connected(connection, let server, _):
            lastFailure = reason
            let next = newConnection()
            state = .reconnecting(Attempt(number: 0, server: (server + 1) % serverCount, connection: next, phase: .waiting))
            return .lost(reason: reason, retryAfter: configuration.reconnect.delay(attempt: 0, random: random), connection: next)
        case .reconnecting(let attempt):
            guard attempt.connection == connection, attempt.phase != .waiting else { return .none }
            lastFailure = reason
            let number = attempt.number + 1
            if let limit = configuration.maxReconnectAttempts, number >= limit {
                state = .closed
                buffered = []
                bufferedBytes = 0
                return .giveUp(.connectionLost("gave up after \(number) reconnect attempts: \(reason)"))
            }
            let next = newConnection()
            state = .reconnecting(Attempt(number: number, server: (attempt.server + 1) % serverCount, connection: next, phase: .waiting))
            return .retry(after: configuration.reconnect.delay(attempt: number, random: random), connection: next)
        default:
            return .none
        }
    }

    // MARK: Connected

    mutating func keepaliveTick() -> KeepaliveAction {
        guard case .connected(let connection, let server, let outstanding) = state else { return .none }
        guard outstanding < configuration.maxPingsOutstanding else { return .stale(connection) }
        state = .connected(connection: connection, server: server, pingsOutstanding: outstanding + 1)
        return .ping
    }

    /// `flush()`: a PING whose PONG proves the server has processed everything sent before it.
    mutating func flushRequested() -> NATSError? {
        switch state {
        case .connected(let connection, let server, let outstanding):
            state = .connected(connection: connection, server: server, pingsOutstanding: outstanding + 1)
            return nil
        case .closed: return .closed
        default: return .notConnected
        }
    }

    /// A publish, already encoded as `frame` (PUB line, payload, CRLF).
    mutating func publish(_ frame: ByteBuffer, payloadSize: Int) -> PublishAction {
        if let error = refusal(ofPayloadSize: payloadSize) { return .fail(error) }
        switch state {
        case .connected: return .write
        case .closed: return .fail(.closed)
        case .connecting, .reconnecting:
            guard bufferedBytes + frame.readableBytes <= configuration.reconnectBufferLimit else {
                return .fail(.reconnectBufferFull(limit: configuration.reconnectBufferLimit))
            }
            buffered.append(frame)
            bufferedBytes += frame.readableBytes
            return .buffered
        }
    }

    /// Why a payload of `size` bytes cannot be published (larger than the server's `max_payload`), or nil.
    func refusal(ofPayloadSize size: Int) -> NATSError? {
        guard let limit = serverInfo?.maxPayload, size > limit else { return nil }
        return .payloadTooLarge(size: size, limit: limit)
    }

    /// Records the subscription; returns whether to send SUB now (else the next handshake sends it).
    mutating func subscribe(_ subscription: Subscription) throws(NATSError) -> Bool {
        if case .closed = state { throw .closed }
        subscriptions[subscription.id] = subscription
        return isConnected
    }

    /// `send`: write UNSUB now; `finish`: the subscription is gone, end its stream.
    struct UnsubscribeAction: Equatable {
        var send: Bool
        var finish: Bool
    }

    mutating func unsubscribe(id: UInt64, afterMessages max: Int? = nil) -> UnsubscribeAction {
        guard var subscription = subscriptions[id] else { return UnsubscribeAction(send: false, finish: false) }
        if let max, subscription.delivered < max {
            subscription.maxMessages = max
            subscriptions[id] = subscription
            return UnsubscribeAction(send: isConnected, finish: false)
        }
        subscriptions[id] = nil
        return UnsubscribeAction(send: isConnected, finish: true)
    }

    enum MessageAction: Equatable {
        /// Hand it to the subscriber; `last`: the max was reached, end the stream after it.
        case deliver(last: Bool)
        /// No such subscription (any more): a message that crossed our UNSUB.
        case discard
    }

    mutating func messageReceived(subscriptionID id: UInt64, connection: ConnectionID) -> MessageAction {
        guard isCurrent(connection), var subscription = subscriptions[id] else { return .discard }
        subscription.delivered += 1
        if let max = subscription.maxMessages, subscription.delivered >= max {
            subscriptions[id] = nil
            return .deliver(last: true)
        }
        subscriptions[id] = subscription
        return .deliver(last: false)
    }

    /// `close()`: returns false if already closed. Buffered publishes are dropped.
    mutating func close() -> Bool {
        if case .closed = state { return false }
        state = .closed
        buffered = []
        bufferedBytes = 0
        return true
    }

    /// Subscriptions still recorded, ended when the client closes.
    mutating func removeAllSubscriptions() -> [UInt64] {
        defer { subscriptions = [:] }
        return Array(subscriptions.keys)
    }
}
