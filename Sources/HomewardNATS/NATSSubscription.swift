import NIOCore
import Synchronization

/// Messages of one subscription, in the order the server sent them. Each subscription has a bounded
/// buffer: a consumer that falls behind loses messages (counted in `droppedMessages`) instead of
/// making the client hold an unbounded backlog or slowing every other subscription on the connection.
///
/// Iterating ends after `unsubscribe()`, when an auto-unsubscribe max is reached, or when the client
/// closes. A consumer that stops iterating (its task cancelled) unsubscribes.
public final class NATSSubscription: AsyncSequence, Sendable {
    public typealias Element = NATSMessage

    /// Which messages a full buffer gives up.
    public enum Overflow: Sendable {
        /// Keep the newest (a position stream wants the latest position, not an old one).
        case dropOldest
        /// Keep what is buffered and drop what arrives.
        case dropNewest
    }

    public let subject: String
    public let queueGroup: String?
    /// The `sid` in SUB/UNSUB/MSG.
    public let id: UInt64
    private let stream: AsyncStream<NATSMessage>
    private let drops: NATSCounter
    private let received: NATSCounter
    private let client: NATSClient

    init(subject: String, queueGroup: String?, id: UInt64, stream: AsyncStream<NATSMessage>, drops: NATSCounter, received: NATSCounter,
         client: NATSClient) {
        self.subject = subject
        self.queueGroup = queueGroup
        self.id = id
        self.stream = stream
        self.drops = drops
        self.received = received
        self.client = client
    }

    /// Messages the full buffer dropped so far (slow consumer).
    public var droppedMessages: Int { drops.value }

    /// Messages put in the buffer so far (iterated or still waiting). Counted on the client's loop as each
    /// message is read from the socket, so once a `flush` returns this counts every message the server
    /// sent on this subscription before its PONG.
    public var receivedMessages: Int { received.value }

    public func makeAsyncIterator() -> AsyncStream<NATSMessage>.Iterator { stream.makeAsyncIterator() }

    /// Stops the subscription now; messages already buffered are still delivered, then iteration ends.
    public func unsubscribe() async {
        await client.unsubscribe(id: id, afterMessages: nil)
    }

    /// Lets the server deliver `count` messages in total on this subscription, then ends it.
    public func unsubscribe(afterMessages count: Int) async {
        await client.unsubscribe(id: id, afterMessages: Swift.max(count, 0))
    }
}

/// A subscription whose messages go to a handler on the client's event loop
/// (`NATSClient.subscribe(subject:queueGroup:handler:)`).
public final class NATSHandlerSubscription: Sendable {
    public let subject: String
    public let queueGroup: String?
    /// The `sid` in SUB/UNSUB/MSG.
    public let id: UInt64
    private let received: NATSCounter
    private let client: NATSClient

    init(subject: String, queueGroup: String?, id: UInt64, received: NATSCounter, client: NATSClient) {
        self.subject = subject
        self.queueGroup = queueGroup
        self.id = id
        self.received = received
        self.client = client
    }

    /// Messages handed to the handler so far.
    public var receivedMessages: Int { received.value }

    /// Stops the subscription: once this returns, the handler is not called again.
    public func unsubscribe() async {
        await client.unsubscribe(id: id, afterMessages: nil)
    }
}

/// A count written on the client's event loop and read anywhere.
final class NATSCounter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    func add(_ amount: Int) { count.add(amount, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
