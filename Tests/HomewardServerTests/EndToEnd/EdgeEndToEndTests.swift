import HomewardProtocol
import NIOCore
import NIOWebSocket
import XCTest

@testable import HomewardServer

/// The network edge under abuse: control-frame floods, too many unauthenticated connections from one
/// address, and accepting while out of file descriptors. Slow readers and floods measured by the relay's
/// memory are in tests/python/test_edge.py and the fuzzer.
final class EdgeEndToEndTests: EndToEndTestCase {
    private func controlFrame(_ opcode: WebSocketOpcode) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, maskKey: .random(), data: ByteBuffer(string: "x"))
    }

    func testPingFloodIsClosedWithPolicyViolationBeforeSigningIn() async throws {
        // The sign-in timeout also closes with 1008: make it longer than the wait for the close.
        let relay = try await startRelay {
            $0.limits.controlFramesPerSecond = 5
            $0.limits.authenticationTimeout = 60
        }
        let bob = try await relay.user("bob")
        let flooder = try await relay.connect(label: "flooder")
        // 5/s with bursts of 10: the 11th frame of a tight loop is over the limit.
        for _ in 0..<40 { try? await flooder.sendFrame(controlFrame(.ping)) }
        let code = try await flooder.closeCode()
        XCTAssertEqual(code, CloseCode.policyViolation.rawValue)
        try await flooder.waitUntilClosed()
        try await bob.client.ok("friend.list")
    }

    func testUnsolicitedPongsCountAgainstTheSameLimit() async throws {
        let relay = try await startRelay { $0.limits.controlFramesPerSecond = 5 }
        let alice = try await relay.user("alice")
        for _ in 0..<40 { try? await alice.client.sendFrame(controlFrame(.pong)) }
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, CloseCode.policyViolation.rawValue)
    }

    func testPingsWithinTheLimitAreAnsweredAndTheConnectionStays() async throws {
        let relay = try await startRelay { $0.limits.controlFramesPerSecond = 5 }
        let alice = try await relay.user("alice")
        for _ in 0..<5 { try await alice.client.sendFrame(controlFrame(.ping)) }
        try await alice.client.ok("friend.list")
        XCTAssertTrue(alice.client.isActive)
    }

    func testUnauthenticatedConnectionsPerAddressAreLimitedAndSigningInFreesASlot() async throws {
        let relay = try await startRelay { $0.limits.maxUnauthenticatedPerAddress = 2 }
        let first = try await relay.connect(label: "first")
        _ = try await relay.connect(label: "second")
        do {
            _ = try await relay.connect(label: "third")
            XCTFail("a third unauthenticated connection from 127.0.0.1 was accepted")
        } catch {}
        let slots = try relay.running.unauthenticated
        XCTAssertEqual(slots.count(for: "127.0.0.1"), 2, "the refused connection took no slot")
        // Signing in gives the slot back: another client may now connect.
        try await first.ok("register", ["username": .string(TestRelay.uniqueUsername("first")), "password": "long enough pw"])
        XCTAssertEqual(slots.count(for: "127.0.0.1"), 1)
        let third = try await relay.connect(label: "third")
        try await third.ok("ping")
    }

    func testAClosedUnauthenticatedConnectionGivesItsSlotBack() async throws {
        let relay = try await startRelay { $0.limits.maxUnauthenticatedPerAddress = 1 }
        let only = try await relay.connect(label: "only")
        let slots = try relay.running.unauthenticated
        XCTAssertEqual(slots.count(for: "127.0.0.1"), 1)
        await only.close()
        // The relay releases the slot when it sees the close, which the client cannot observe; wait for it.
        let deadline = Date().addingTimeInterval(5)
        while slots.count(for: "127.0.0.1") > 0, Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual(slots.count(for: "127.0.0.1"), 0)
        let next = try await relay.connect(label: "next")
        try await next.ok("ping")
    }

    func testListeningSocketBacksOffAcceptingWhenOutOfFileDescriptors() async throws {
        let relay = try await startRelay()
        let backsOff = try await relay.running.backsOffAccepting
        XCTAssertTrue(backsOff, "no AcceptBackoff on the listening socket")
    }
}
