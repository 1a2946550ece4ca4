import Foundation
import HomewardProtocol
import HomewardTestSupport
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
import XCTest

/// Collects the raw bytes of one TLS connection and notes when the relay closes it.
private final class RawCollector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let closed: EventLoopPromise<[UInt8]>
    private var bytes: [UInt8] = []

    init(closed: EventLoopPromise<[UInt8]>) { self.closed = closed }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bytes += Array(buffer: unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed.succeed(bytes)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Regressions for what the conformance fuzzer (tests/fuzz) found. See docs/conformance.md.
final class ConformanceRegressionTests: EndToEndTestCase {
    private func closeFrame(code: UInt16, reason: [UInt8]) -> WebSocketFrame {
        var data = ByteBuffer()
        data.writeInteger(code)
        data.writeBytes(reason)
        return WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data)
    }

    /// Found by the fuzzer: a close frame whose reason is not UTF-8 was answered with 1000.
    /// RFC 6455 5.5.1 / 8.1: the connection fails; the relay now answers 1007.
    func testCloseReasonThatIsNotUTF8GetsClose1007() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await alice.client.sendFrame(closeFrame(code: 1000, reason: [0xFF, 0xFE]))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1007)
        try await alice.client.waitUntilClosed()
        // Nobody else is disturbed.
        _ = try await bob.client.ok("friend.list")
    }

    /// The same close with a valid UTF-8 reason is still a normal close.
    func testCloseWithUTF8ReasonIsAnsweredWith1000() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        try await alice.client.sendFrame(closeFrame(code: 1000, reason: Array("bye \u{1F44B}".utf8)))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1000)
    }

    /// Found by the fuzzer: after NIO answered a request with oversized headers with 400, the relay kept
    /// the connection open until the 10 s handshake timeout. It now closes right after the 400.
    func testOversizedHandshakeHeadersGet400AndAnImmediateClose() async throws {
        let relay = try await startRelay()
        let sslContext = try TestClient.tlsContext(trusting: relay.caPath)
        let group = MultiThreadedEventLoopGroup.singleton
        let closed = group.any().makePromise(of: [UInt8].self)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(RawCollector(closed: closed))
                }
            }
            .connect(host: "127.0.0.1", port: try relay.port).get()
        let request = "GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "X-Big: " + String(repeating: "a", count: 100_000) + "\r\n\r\n"
        let started = Date()
        channel.writeAndFlush(ByteBuffer(string: request), promise: nil)
        let bytes = try await withTimeout(8, "the relay closing the connection") { try await closed.futureResult.get() }
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 4"), String(decoding: bytes.prefix(80), as: UTF8.self))
        XCTAssertLessThan(elapsed, 5, "closed only after \(elapsed) s (the handshake timeout is 10 s)")
    }
}

/// Found by the fuzzer: length limits counted grapheme clusters, so one "character" could carry
/// thousands of combining marks (a 1-character display name of 18 KB was accepted).
final class ConformanceParsingRegressionTests: XCTestCase {
    private func parse(_ object: [String: Any]) -> IncomingRequest {
        let data = try! JSONSerialization.data(withJSONObject: object)
        return IncomingRequest.parse(Array(data), now: 1_763_830_000_000)
    }

    private func isBadRequest(_ request: IncomingRequest) -> Bool {
        if case .failure(let error) = request.result { return error.code == .badRequest }
        return false
    }

    func testLimitsCountUnicodeScalarsNotGraphemeClusters() {
        let zalgo = "e" + String(repeating: "\u{0301}", count: 64)  // 1 grapheme cluster, 65 scalars
        XCTAssertTrue(isBadRequest(parse(["type": "register", "username": "alice", "password": "correct horse", "name": zalgo])))
        XCTAssertTrue(isBadRequest(parse(["type": "session.start", "note": "n" + String(repeating: "\u{0301}", count: 280)])))
        XCTAssertTrue(isBadRequest(parse(["type": "alarm.raise", "text": "t" + String(repeating: "\u{0301}", count: 500)])))
        // 64 precomposed letters are fine.
        XCTAssertFalse(isBadRequest(parse(["type": "register", "username": "alice", "password": "correct horse",
                                           "name": String(repeating: "\u{00E9}", count: 64)])))
    }
}
