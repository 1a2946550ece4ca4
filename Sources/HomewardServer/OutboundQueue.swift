import HomewardProtocol
import NIOCore

/// Messages waiting for a slow client. A newer position from a sender replaces that sender's
/// queued one, so a slow observer gets the latest fix rather than a growing backlog; every
/// other message is kept, and counted so the connection can be dropped when too many pile up.
struct OutboundQueue {
    // Only a client that cannot keep up has anything queued; the default capacity (16) would be allocated
    // for every connection up front. It doubles when it has to.
    private var items = CircularBuffer<EncodedMessage>(initialCapacity: 1)
    /// Sequence number of `items.first`; positions are indexed by sequence so replacing is O(1).
    private var firstSequence = 0
    private var queuedPosition: [String: Int] = [:]
    private(set) var nonDroppableCount = 0

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }

    /// Returns true when the message replaced an older position instead of growing the queue.
    @discardableResult
    mutating func append(_ message: EncodedMessage) -> Bool {
        if let sender = message.positionFrom {
            if let sequence = queuedPosition[sender] {
                items[items.index(items.startIndex, offsetBy: sequence - firstSequence)] = message
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
        if let sender = message.positionFrom, queuedPosition[sender] == firstSequence {
            queuedPosition[sender] = nil
        } else if message.positionFrom == nil {
            nonDroppableCount -= 1
        }
        firstSequence += 1
        return message
    }
}
