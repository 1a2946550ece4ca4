import Dispatch
@testable import HomewardCluster
import HomewardCore
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import NIOCore
import Synchronization
import XCTest

/// A relay too far behind to buffer every change notice loses some: that is a gap, which it must treat
/// as an unreadable notice (reload), or it would miss revocations and changes until its next reload.
final class ChangeNoticeGapTests: XCTestCase {
    func testNoticesDroppedByAFullBufferAreReportedAsAGapToReloadFrom() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let bus = try await NATSBus.connect(servers: [NATSServerAddress(host: "127.0.0.1", port: server.port)], node: "here",
                                            logger: Logger(label: "test"), changeBufferLimit: 4)
        let receiver = HeldReceiver()
        try await bus.start(delivering: receiver)
        let other = try await NATSClient.connect(urls: [server.url])
        // The receiver holds on to the first notice while 19 more arrive: 4 fit in the buffer, the rest are dropped.
        for index in 0..<20 {
            let notice = ChangeNotice(node: "there", revokedTokens: ["token-\(index)"])
            try await other.publish(subject: "hw.changes", payload: ClusterCodec.encode(notice))
        }
        // On the same connection after them: once it arrives, every notice has been buffered or dropped.
        try await other.publish(subject: "hw.presence", payload: ClusterCodec.encode(.heartbeat(PresenceHeartbeat(node: "there", epoch: "e", seq: 0))))
        try await other.flush()
        let notices = try await withTimeout(10, "the notices") {
            var notices: [ChangeNotice] = []
            for await heard in receiver.heard {
                switch heard {
                case .presence: receiver.release()
                case .notice(let notice): notices.append(notice)
                }
                if notices.count == 6 { break }
            }
            return notices
        }
        // Five made it (the one held and four buffered), in order; the gap comes as one unreadable notice.
        let delivered = notices.filter { $0 != .unreadable }.compactMap { $0.revokedTokens.first }
        XCTAssertEqual(delivered.count, 5, "\(notices)")
        XCTAssertEqual(delivered, delivered.sorted { Int($0.dropFirst(6))! < Int($1.dropFirst(6))! })
        XCTAssertEqual(notices.filter { $0 == .unreadable }.count, 1, "\(notices)")
        await other.close()
        await bus.stop()
    }
}

/// Holds the first change notice until released (a relay busy elsewhere), and hands on what it is given.
private final class HeldReceiver: BusReceiver {
    enum Heard: Sendable {
        case notice(ChangeNotice)
        case presence
    }

    let heard: AsyncStream<Heard>
    private let continuation: AsyncStream<Heard>.Continuation
    private let gate = DispatchSemaphore(value: 0)
    private let held = Mutex(false)

    init() { (heard, continuation) = AsyncStream.makeStream() }

    func remoteChanges(_ notice: ChangeNotice) {
        let first = held.withLock { held in
            defer { held = true }
            return !held
        }
        // Blocks the bus's receiving task, as a relay that does not keep up would; released by the test.
        if first { gate.wait() }
        continuation.yield(.notice(notice))
    }

    func release() { gate.signal() }

    func remotePresence(_ message: PresenceMessage) { continuation.yield(.presence) }
    func localPresenceSnapshot() async -> PresenceSnapshot { PresenceSnapshot(node: "here", epoch: "e", seq: 0) }

    func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {}
    func localLastPosition(of walker: String, for askers: [String]) -> LastPositionAnswer? { nil }
    func busDisconnected() {}
    func missedNotices(of node: String) {}
    func busReconnected() {}
}
