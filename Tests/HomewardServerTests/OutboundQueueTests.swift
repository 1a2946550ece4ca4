import HomewardProtocol
import NIOCore
import XCTest

@testable import HomewardServer

final class OutboundQueueTests: XCTestCase {
    private func pos(_ from: String, _ n: Int64) -> EncodedMessage {
        EncodedMessage(Event.position(from: from, Position(lat: 1, lon: 2, ts: n)).json, positionFrom: from)
    }

    private func event(_ n: Int64) -> EncodedMessage {
        EncodedMessage(Message.event("friend.request", [("n", .int(n))]))
    }

    /// Short names for what comes out: "pos alice 1", "ev 3".
    private func describe(_ message: EncodedMessage) -> String {
        guard let value = try? JSONParser.parse(Array(message.bytes.readableBytesView)) else { return "unparseable" }
        if let from = message.positionFrom {
            XCTAssertEqual(value["from"], .string(from))
            return "pos \(from) \(value["ts"]?.numberValue.map { Int64($0) } ?? -1)"
        }
        return "ev \(value["n"]?.numberValue.map { Int64($0) } ?? -1)"
    }

    private func drain(_ queue: inout OutboundQueue) -> [String] {
        var out: [String] = []
        while let message = queue.popFirst() { out.append(describe(message)) }
        return out
    }

    func testNewerPositionFromSameSenderReplacesOlderInPlace() {
        var queue = OutboundQueue()
        XCTAssertFalse(queue.append(pos("alice", 1)))
        XCTAssertFalse(queue.append(event(1)))
        XCTAssertTrue(queue.append(pos("alice", 2)), "the newer position replaces the queued one")
        XCTAssertEqual(queue.count, 2)
        XCTAssertEqual(drain(&queue), ["pos alice 2", "ev 1"], "in the old one's place, ahead of the event")
        XCTAssertTrue(queue.isEmpty)
    }

    func testPositionsFromDifferentSendersAreKept() {
        var queue = OutboundQueue()
        queue.append(pos("alice", 1))
        queue.append(pos("bob", 1))
        queue.append(pos("alice", 2))
        queue.append(pos("carol", 1))
        queue.append(pos("bob", 2))
        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(drain(&queue), ["pos alice 2", "pos bob 2", "pos carol 1"])
    }

    func testOtherMessagesAreNeverDropped() {
        var queue = OutboundQueue()
        for n in 1...50 {
            XCTAssertFalse(queue.append(event(7)), "identical events are all kept (\(n))")
        }
        XCTAssertEqual(queue.count, 50)
        XCTAssertEqual(queue.nonDroppableCount, 50)
        XCTAssertEqual(drain(&queue), Array(repeating: "ev 7", count: 50))
    }

    func testEventWithoutPositionFromIsNeverReplacedEvenIfItIsAPosShape() {
        var queue = OutboundQueue()
        // A pos-shaped message not marked droppable (positionFrom nil) must be kept.
        let unmarked = EncodedMessage(Event.position(from: "alice", Position(lat: 0, lon: 0, ts: 1)).json)
        queue.append(unmarked)
        queue.append(unmarked)
        queue.append(pos("alice", 2))
        queue.append(pos("alice", 3))
        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(queue.nonDroppableCount, 2)
    }

    func testNonDroppableCountTracksAppendsAndPops() {
        var queue = OutboundQueue()
        XCTAssertEqual(queue.nonDroppableCount, 0)
        queue.append(event(1))
        queue.append(pos("alice", 1))
        queue.append(event(2))
        queue.append(pos("alice", 2))
        XCTAssertEqual(queue.nonDroppableCount, 2)
        XCTAssertEqual(queue.count, 3)
        _ = queue.popFirst()  // ev 1
        XCTAssertEqual(queue.nonDroppableCount, 1)
        _ = queue.popFirst()  // pos alice 2
        XCTAssertEqual(queue.nonDroppableCount, 1)
        _ = queue.popFirst()  // ev 2
        XCTAssertEqual(queue.nonDroppableCount, 0)
        XCTAssertNil(queue.popFirst())
        XCTAssertEqual(queue.nonDroppableCount, 0)
    }

    func testOrderIsKept() {
        var queue = OutboundQueue()
        queue.append(event(1))
        queue.append(pos("alice", 1))
        queue.append(event(2))
        queue.append(pos("bob", 1))
        queue.append(event(3))
        XCTAssertEqual(drain(&queue), ["ev 1", "pos alice 1", "ev 2", "pos bob 1", "ev 3"])
    }

    func testPositionAfterItsPredecessorWasSentIsAppended() {
        var queue = OutboundQueue()
        queue.append(pos("alice", 1))
        queue.append(event(1))
        XCTAssertEqual(queue.popFirst().map(describe), "pos alice 1")
        XCTAssertFalse(queue.append(pos("alice", 2)), "the sent one cannot be replaced; the new one queues")
        XCTAssertEqual(drain(&queue), ["ev 1", "pos alice 2"])
    }

    func testReplacementStaysCorrectAfterPops() {
        // Exercises the sequence arithmetic once the front has moved.
        var queue = OutboundQueue()
        queue.append(event(1))
        queue.append(event(2))
        queue.append(pos("alice", 1))
        queue.append(pos("bob", 1))
        _ = queue.popFirst()
        _ = queue.popFirst()
        queue.append(event(3))
        XCTAssertTrue(queue.append(pos("bob", 2)))
        XCTAssertTrue(queue.append(pos("alice", 2)))
        XCTAssertEqual(queue.popFirst().map(describe), "pos alice 2")
        queue.append(pos("alice", 3))  // alice's slot was sent: appended at the end
        XCTAssertTrue(queue.append(pos("bob", 3)))
        XCTAssertEqual(drain(&queue), ["pos bob 3", "ev 3", "pos alice 3"])
    }

    func testManyReplacementsKeepOneEntryPerSender() {
        var queue = OutboundQueue()
        for n in 1...1000 {
            queue.append(pos("alice", Int64(n)))
            queue.append(pos("bob", Int64(n)))
        }
        XCTAssertEqual(queue.count, 2)
        XCTAssertEqual(queue.nonDroppableCount, 0)
        XCTAssertEqual(drain(&queue), ["pos alice 1000", "pos bob 1000"])
    }

    func testByteCountFollowsAppendsReplacementsAndPops() {
        var queue = OutboundQueue()
        let first = pos("alice", 1), reply = event(1), newer = pos("alice", 22_222)
        queue.append(first)
        queue.append(reply)
        XCTAssertEqual(queue.byteCount, first.framed.readableBytes + reply.framed.readableBytes)
        queue.append(newer)
        XCTAssertEqual(queue.byteCount, newer.framed.readableBytes + reply.framed.readableBytes,
                       "a replaced position no longer counts")
        _ = queue.popFirst()
        XCTAssertEqual(queue.byteCount, reply.framed.readableBytes)
        _ = queue.popFirst()
        XCTAssertEqual(queue.byteCount, 0)
    }

    func testStorageGrownByAStormIsReleasedOnceDrained() {
        var queue = OutboundQueue()
        for n in 0..<5000 {
            queue.append(event(Int64(n)))
            queue.append(pos("sender\(n)", Int64(n)))
        }
        XCTAssertGreaterThan(queue.capacity.items, 10_000)
        while queue.popFirst() != nil {}
        XCTAssertLessThanOrEqual(queue.capacity.items, OutboundQueue.retainedCapacity)
        XCTAssertLessThanOrEqual(queue.capacity.positions, OutboundQueue.retainedCapacity)
        // Still works after the reset, replacement included.
        queue.append(pos("alice", 1))
        XCTAssertTrue(queue.append(pos("alice", 2)))
        XCTAssertEqual(drain(&queue), ["pos alice 2"])
    }
}
