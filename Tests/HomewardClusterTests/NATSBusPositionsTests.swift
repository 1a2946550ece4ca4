@testable import HomewardCluster
import HomewardCore
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import NIOCore
import NIOPosix
import Synchronization
import XCTest

/// Positions from other relays on `NATSBus`: handed to the relay on the event loop the bus's connection reads
/// them on (one of the relay's own), in order, with the restriction they were published under, and no more once
/// nobody here receives the walker.
final class NATSBusPositionsTests: XCTestCase {
    func testPositionsReachTheReceiverOnTheRelaysOwnLoopInOrderWithTheirRestrictions() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let relayLoops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        addTeardownBlock { try? await relayLoops.shutdownGracefully() }
        let bus = try await NATSBus.connect(servers: [NATSServerAddress(host: "127.0.0.1", port: server.port)], node: "here",
                                            logger: Logger(label: "test"), eventLoopGroup: relayLoops)
        let receiver = PositionRecorder(loops: Array(relayLoops.makeIterator()))
        try await bus.start(delivering: receiver)
        await bus.updateInterest(adding: ["ann"], removing: [])

        let walkersRelay = try await NATSClient.connect(urls: [server.url])
        let paused = PositionRestriction.allBut(["bob"])
        let sent = (1...300).map { index in
            (EncodedMessage(Event.position(from: "ann", Position(lat: 57, lon: 11, ts: Int64(index))).json, positionFrom: "ann"),
             index.isMultiple(of: 3) ? paused : nil)
        }
        for (message, restriction) in sent {
            walkersRelay.publishDetached(subject: ClusterSubjects.positions(of: "ann"),
                                         payload: ClusterCodec.encode(message, restriction: restriction))
        }
        try await walkersRelay.flush()
        // Every position was on its way to this relay's connection before the PONG of this round trip.
        _ = await bus.barrier()
        let received = receiver.positions
        XCTAssertEqual(received.map(\.text), sent.map { String(buffer: $0.0.bytes) }, "each position's text as published, in order")
        XCTAssertEqual(received.map(\.restriction), sent.map(\.1))
        XCTAssertTrue(received.allSatisfy(\.onRelayLoop), "handed over on one of the relay's event loops, not from a task")

        await bus.updateInterest(adding: [], removing: ["ann"])
        walkersRelay.publishDetached(subject: ClusterSubjects.positions(of: "ann"), payload: ClusterCodec.encode(sent[0].0, restriction: nil))
        try await walkersRelay.flush()
        _ = await bus.barrier()
        XCTAssertEqual(receiver.positions.count, sent.count, "none after nobody here receives the walker")
        await walkersRelay.close()
        await bus.stop()
    }
}

/// Records each position heard: its text, restriction, and whether it came on one of `loops`.
private final class PositionRecorder: BusReceiver {
    struct Heard: Sendable {
        var text: String
        var restriction: PositionRestriction?
        var onRelayLoop: Bool
    }

    private let loops: [any EventLoop]
    private let heard = Mutex<[Heard]>([])
    var positions: [Heard] { heard.withLock { $0 } }

    init(loops: [any EventLoop]) {
        self.loops = loops
    }

    func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {
        let onRelayLoop = loops.contains { $0.inEventLoop }
        heard.withLock { $0.append(Heard(text: String(buffer: message.bytes), restriction: restriction, onRelayLoop: onRelayLoop)) }
    }

    func remoteChanges(_ notice: ChangeNotice) {}
    func remotePresence(_ message: PresenceMessage) {}
    func localPresenceSnapshot() async -> PresenceSnapshot { PresenceSnapshot(node: "here", epoch: "e", seq: 0) }
    func localLastPosition(of walker: String, for askers: [String]) -> LastPositionAnswer? { nil }
    func busDisconnected() {}
    func missedNotices(of node: String) {}
    func busReconnected() {}
}
