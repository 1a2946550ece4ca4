import NIOCore

/// The line before a change notice on a user's or a timer shard's subject: `#NODE EPOCH NUMBER` and a newline,
/// the notice's relay, that relay's epoch on the bus (new at each start) and the notice's number in it (1, 2, 3…).
/// A notice about two users a relay follows reaches it once per subject; nats-server delivers one connection's
/// messages to another in the order it read them, whatever their subjects, so per relay and epoch the numbers
/// only grow, and a copy is known by its number (`NoticeDuplicates`) before it is decoded. `hw.changes` carries
/// the notice without the line (one message per notice there), as relays of the version before read it.
struct NoticeStamp: Sendable, Equatable {
    var node: String
    var epoch: String
    var number: UInt64

    /// `notice` (its JSON) after this stamp's line, in one buffer.
    func stamped(_ notice: ByteBuffer) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(node.utf8.count + epoch.utf8.count + 24 + notice.readableBytes)
        buffer.writeString("#\(node) \(epoch) \(number)\n")
        buffer.writeImmutableBuffer(notice)
        return buffer
    }

    /// The stamp of `payload` and the notice after it; nil for a payload without one (`hw.changes`). A line that
    /// starts as a stamp and cannot be read is refused.
    static func split(_ payload: ByteBuffer) throws -> (stamp: NoticeStamp, notice: ByteBuffer)? {
        let bytes = payload.readableBytesView
        guard bytes.first == UInt8(ascii: "#") else { return nil }
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")),
              let line = payload.getString(at: payload.readerIndex + 1, length: newline - bytes.startIndex - 1),
              let notice = payload.getSlice(at: payload.readerIndex + (newline - bytes.startIndex) + 1,
                                            length: payload.readableBytes - (newline - bytes.startIndex) - 1) else {
            throw ClusterCodec.DecodingError.malformed("a notice stamp without its notice")
        }
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, let number = UInt64(parts[2]) else {
            throw ClusterCodec.DecodingError.malformed("a notice stamp that is not node, epoch and number")
        }
        return (NoticeStamp(node: String(parts[0]), epoch: String(parts[1]), number: number), notice)
    }
}

/// The last notice number taken from each relay in its current epoch, to drop the copies of a notice that came on
/// several subjects. A value the bus's receiving task owns; unit tests drive it.
struct NoticeDuplicates: Sendable {
    private var last: [String: (epoch: String, number: UInt64)] = [:]

    /// Whether the notice of `stamp` is new here (and takes it as the last from its relay): false for a number at or
    /// below the last one taken from that relay in that epoch. A new epoch (the relay restarted) starts afresh.
    mutating func take(_ stamp: NoticeStamp) -> Bool {
        if let seen = last[stamp.node], seen.epoch == stamp.epoch, stamp.number <= seen.number { return false }
        last[stamp.node] = (stamp.epoch, stamp.number)
        return true
    }
}
