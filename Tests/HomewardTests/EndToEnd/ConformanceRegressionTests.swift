import HomewardProtocol
import NIOCore
import NIOWebSocket
import XCTest

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
}
