import HomewardProtocol
import NIOCore

/// Messages waiting for a slow client. A newer position from a sender replaces that sender's
/// queued one, so a slow observer gets the latest fix rather than a growing backlog; every
/// other message is kept, and counted (messages and bytes) so the connection can be dropped
/// when too many pile up.
struct OutboundQueue {
    // Only a client that cannot keep up has anything queued; the default capacity (16) would be allocated
    // for every connection up front. It doubles when it has to.
    private var items = CircularBuffer<EncodedMessage>(initialCapacity: 1)
    /// Sequence number of `items.first`; positions are indexed by sequence so replacing is O(1).
    private var firstSequence = 0
    private var queuedPosition: [String: Int] = [:]
    private(set) var nonDroppableCount = 0
    /// Bytes of every queued message as it goes on the wire (frame header included). A message shared by a
    /// fan-out is counted in full by each queue holding it: the budget is what this connection pins.
    private(set) var byteCount = 0

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }

    /// Returns true when the message replaced an older position instead of growing the queue.
    @discardableResult
    mutating func append(_ message: EncodedMessage) -> Bool {
        byteCount += message.framed.readableBytes
        if let sender = message.positionFrom {
            if let sequence = queuedPosition[sender] {
                let index = items.index(items.startIndex, offsetBy: sequence - firstSequence)
                byteCount -= items[index].framed.readableBytes
                items[index] = message
                return true
            }
            queuedPosition[sender] = firstSequence + items.count
        } else {
            nonDroppableCount += 1
        }
        items.append(message)
        return false
    }

    mutating func popFirst() -> EncodedMessage? {
        guard let message = items.popFirst() else { return nil }
        byteCount -= message.framed.readableBytes
        if let sender = message.positionFrom, queuedPosition[sender] == firstSequence {
            queuedPosition[sender] = nil
        } else if message.positionFrom == nil {
            nonDroppableCount -= 1
        }
        firstSequence += 1
        if items.isEmpty { releaseStorage() }
        return message
    }

    /// Storage a storm grew is given back once the queue drains: `CircularBuffer` and `Dictionary` keep
    /// their capacity when emptied, which would pin a burst's worth of memory per connection for its life.
    private mutating func releaseStorage() {
        if items.capacity > Self.retainedCapacity { items = CircularBuffer(initialCapacity: 1) }
        if queuedPosition.capacity > Self.retainedCapacity { queuedPosition = [:] }
    }

    /// Capacity kept across drains: a connection that queues a few messages now and then does not reallocate.
    static let retainedCapacity = 16

    /// Storage held by the queue's two containers, in elements (for tests of `releaseStorage`).
    var capacity: (items: Int, positions: Int) { (items.capacity, queuedPosition.capacity) }
}
