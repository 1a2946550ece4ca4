import CoreMetrics
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import NIOCore
import NIOEmbedded
import NIOWebSocket
@testable import HomewardServer
import XCTest

/// The connection handler on an `EmbeddedChannel`: frames in, frames out, no sockets and no sleeps.
/// Frames come unmasked: the masking rules are `FrameValidator`'s, which is not in this pipeline.
/// Only paths that the handler answers without the relay's actor are driven here (the actor answers
/// from its own thread, which an embedded loop must not be called from); the end-to-end suites cover
/// the rest.
final class WebSocketConnectionTests: XCTestCase {
    private var channel: EmbeddedChannel!
    private var connection: WebSocketConnection!

    override func setUp() async throws {
        let relay = try await Relay(store: SQLiteStore.inMemory(), hasher: .forTests, metrics: NOOPMetricsHandler.instance)
        var limits = ConnectionLimits()
        limits.controlFramesPerSecond = 5
        limits.maxOutboundBacklog = 3
        channel = EmbeddedChannel()
        let loop = ConnectionLoop(eventLoop: channel.embeddedEventLoop)
        let connection = WebSocketConnection(relay: relay, limits: limits, metrics: RelayMetrics(factory: NOOPMetricsHandler.instance),
                                             loop: loop, logger: TestRelay.logger, peer: "127.0.0.1")
        self.connection = connection
        try channel.pipeline.syncOperations.addHandler(connection)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()
    }

    override func tearDown() {
        _ = try? channel.finish()
        channel = nil
        connection = nil
    }

    private func send(_ frame: WebSocketFrame) throws {
        try channel.writeInbound(frame)
        channel.embeddedEventLoop.run()
    }

    private func sendText(_ text: String) throws {
        try send(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text)))
    }

    private func written() throws -> [WebSocketFrame] {
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    private func json(_ frame: WebSocketFrame) throws -> JSONValue {
        XCTAssertEqual(frame.opcode, .text)
        return try JSONParser.parse(frame.unmaskedData.readableBytesView)
    }

    private func closeCode(_ frame: WebSocketFrame?) -> UInt16? {
        guard let frame, frame.opcode == .connectionClose else { return nil }
        var data = frame.unmaskedData
        return data.readInteger(as: UInt16.self)
    }

    func testRequestsBeforeSignInAreRefusedAndTheConnectionStays() throws {
        try sendText(#"{"type":"friend.list","id":1}"#)
        try sendText(#"{"type":"pos","id":2,"lat":1,"lon":2}"#)
        try sendText(#"{"type":"ping","id":3}"#)
        let replies = try written().map(json)
        XCTAssertEqual(replies.map { $0["code"] }, ["unauthenticated", "unauthenticated", nil])
        XCTAssertEqual(replies.map { $0["re"] }, [1, 2, 3])
        XCTAssertTrue(channel.isActive)
    }

    func testBinaryFramesAreUnsupported() throws {
        try send(WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(bytes: [1, 2])))
        XCTAssertEqual(try written().map(json).first?["code"], "unsupported")
        XCTAssertTrue(channel.isActive)
    }

    func testInvalidUTF8ClosesWith1007() throws {
        try send(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: [0x7B, 0xFF, 0x7D])))
        XCTAssertEqual(closeCode(try written().last), 1007)
    }

    func testABurstOfPingsGetsOnePongWithTheLatestPayload() throws {
        // One read burst: three pings, then the end of the burst.
        for byte in UInt8(1)...3 {
            channel.pipeline.fireChannelRead(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(bytes: [byte])))
        }
        channel.pipeline.fireChannelReadComplete()
        channel.embeddedEventLoop.run()
        let frames = try written()
        XCTAssertEqual(frames.map(\.opcode), [.pong])
        XCTAssertEqual(frames.first?.unmaskedData, ByteBuffer(bytes: [3]))
    }

    func testAPingFloodClosesWith1008() throws {
        for _ in 0..<11 { try send(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())) }
        let frames = try written()
        XCTAssertEqual(closeCode(frames.last), 1008)
        XCTAssertEqual(frames.filter { $0.opcode == .pong }.count, 10, "each burst within the limit is answered")
    }

    func testNoSignInWithinTheTimeoutClosesWith1008() throws {
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        XCTAssertTrue(try written().isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        XCTAssertEqual(closeCode(try written().last), 1008)
    }

    func testASlowClientDroppedForItsBacklogGetsClose1008AheadOfTheQueue() throws {
        // The client stopped reading: messages queue up until the backlog limit (3 here) is passed.
        channel.isWritable = false
        for index in 1...4 { connection.enqueue(EncodedMessage(.object([("type", .string("note")), ("n", .int(Int64(index)))]))) }
        let frames = try written()
        XCTAssertEqual(frames.map(\.opcode), [.connectionClose], "the close frame goes out, none of the queued messages")
        XCTAssertEqual(closeCode(frames.first), 1008)
        // Once the frame is written the connection ends (a socket that never takes it: after the timeout).
        channel.embeddedEventLoop.run()
        XCTAssertFalse(channel.isActive)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        XCTAssertTrue(try written().isEmpty, "nothing queued before the close is written after it")
    }

    func testAClientsCloseFrameIsAnswered() throws {
        var payload = ByteBuffer()
        payload.writeInteger(UInt16(1000))
        try send(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload))
        XCTAssertEqual(closeCode(try written().last), 1000)
        // Nothing more is served once closing.
        try sendText(#"{"type":"ping","id":1}"#)
        XCTAssertTrue(try written().isEmpty)
    }
}

/// A connection that closes while its sign-in is with the relay: the relay must not keep it as online.
/// On a `NIOAsyncTestingChannel`, whose loop may be called from the relay's thread and runs only when told.
final class SignInRaceTests: XCTestCase {
    func testAConnectionGoneBeforeItsSignInIsAnsweredIsNotLeftOnline() async throws {
        let database = try SQLiteStore.inMemory()
        let token = Token.mint()
        // Issued two minutes ago: signing in with it records its use, a write the test holds.
        let issued = Relay.systemMillis() - 120_000
        try await database.apply([.createUser(UserProfile(username: "alice", name: "Alice"), passwordHash: "x", at: issued),
                                  .createToken(hash: Token.hash(token), username: "alice", at: issued)])
        let store = InstrumentedStore(database)
        let relay = try await Relay(store: store, hasher: .forTests, metrics: NOOPMetricsHandler.instance)
        let channel = NIOAsyncTestingChannel()
        let loop = ConnectionLoop(eventLoop: channel.testingEventLoop)
        try await channel.testingEventLoop.executeInContext {
            let connection = WebSocketConnection(relay: relay, limits: ConnectionLimits(),
                                                 metrics: RelayMetrics(factory: NOOPMetricsHandler.instance),
                                                 loop: loop, logger: TestRelay.logger, peer: "127.0.0.1")
            try channel.pipeline.syncOperations.addHandler(connection)
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()

        // The sign-in waits in the store (it records the token's use) while the connection goes away.
        store.holdWrites()
        try await channel.writeInbound(WebSocketFrame(fin: true, opcode: .text,
                                                      data: ByteBuffer(string: #"{"type":"hello","id":1,"token":"\#(token)"}"#)))
        try await channel.close()
        store.releaseWrites()
        await relay.drain()  // the relay signs alice in and answers a connection that is gone
        // The sign-in's commit; the last-seen time of alice going away may be stored as well, in its
        // own turn of the relay, before or after this line: so at least one.
        XCTAssertGreaterThanOrEqual(store.commits, 1, "the sign-in went through")
        await channel.testingEventLoop.run()
        await relay.drain()
        XCTAssertFalse(relay.presence.isOnline("alice"), "a closed connection must not keep alice online")
        XCTAssertEqual(relay.presence.connectionCount(of: "alice"), 0)
    }
}
