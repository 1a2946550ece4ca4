import HomewardCore
import HomewardProtocol
import NIOCore
@testable import HomewardServer
import XCTest

/// The connection's protocol logic as a value: inputs in, actions out, no channel.
final class ConnectionStateMachineTests: XCTestCase {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let alice = Authentication(username: "alice", tokenHash: "h")

    private func machine(_ configure: (inout ConnectionLimits) -> Void = { _ in }) -> ConnectionStateMachine {
        var limits = ConnectionLimits()
        configure(&limits)
        return ConnectionStateMachine(limits: limits, now: start)
    }

    private func request(_ text: String) -> IncomingRequest {
        IncomingRequest.parse(Array(text.utf8), now: 1_763_830_000_000)
    }

    private func signedIn() -> ConnectionStateMachine {
        var machine = machine()
        _ = machine.received(request(#"{"type":"hello","id":1,"token":"t"}"#), now: start)
        _ = machine.served(.success(RelayReply([], auth: .authenticated(alice))))
        return machine
    }

    func testOnlySignInRequestsAndPingAreServedBeforeSignIn() {
        var machine = machine()
        XCTAssertEqual(machine.received(request(#"{"type":"friend.list","id":1}"#), now: start),
                       .replyError(ProtocolError(.unauthenticated, "sign in first: register, login or hello"), .int(1)))
        XCTAssertEqual(machine.received(request(#"{"type":"pos","id":2,"lat":1,"lon":2}"#), now: start),
                       .replyError(ProtocolError(.unauthenticated, "sign in first"), .int(2)))
        XCTAssertEqual(machine.received(request(#"{"type":"ping","id":3}"#), now: start), .replyOK(.int(3)))
        XCTAssertEqual(machine.received(request(#"{"type":"hello","id":4,"token":"t"}"#), now: start),
                       .serve(.hello(token: "t"), auth: nil, id: .int(4)))
    }

    func testRequestsWaitForTheOneInFlightAndKeepTheirOrder() {
        var machine = machine()
        XCTAssertEqual(machine.received(request(#"{"type":"hello","id":1,"token":"t"}"#), now: start),
                       .serve(.hello(token: "t"), auth: nil, id: .int(1)))
        // Sent before the sign-in is answered: served after it, as the signed-in user.
        XCTAssertEqual(machine.received(request(#"{"type":"pos","lat":1,"lon":2,"ts":5}"#), now: start), .none)
        XCTAssertEqual(machine.received(request(#"{"type":"friend.list","id":2}"#), now: start), .none)
        XCTAssertNil(machine.nextWaiting(), "nothing starts while the sign-in is with the relay")

        let served = machine.served(.success(RelayReply([("user", "alice")], auth: .authenticated(alice))))
        XCTAssertTrue(served.signedIn)
        XCTAssertEqual(machine.auth, alice)
        XCTAssertEqual(machine.nextWaiting(), .publish(Position(lat: 1, lon: 2, ts: 5), from: "alice", id: nil))
        XCTAssertEqual(machine.nextWaiting(), .serve(.friendList, auth: alice, id: .int(2)))
        XCTAssertNil(machine.nextWaiting(), "friend.list is in flight")
        _ = machine.served(.success(RelayReply()))
        XCTAssertNil(machine.nextWaiting())
    }

    func testRepeatedFailedSignInsCloseTheConnection() {
        var machine = machine { $0.maxAuthenticationFailures = 3 }
        for attempt in 1...3 {
            _ = machine.received(request(#"{"type":"hello","id":1,"token":"wrong"}"#), now: start + .seconds(Int64(attempt)))
            let served = machine.served(.failure(.unauthenticated("unknown or revoked token")))
            XCTAssertEqual(served.close?.code, attempt == 3 ? .policyViolation : nil, "attempt \(attempt)")
            guard case .failure(let error)? = served.reply else { return XCTFail("no error reply") }
            XCTAssertEqual(error.code, .unauthenticated)
        }
    }

    func testLogoutWaitsForSignInAgain() {
        var machine = signedIn()
        XCTAssertEqual(machine.signInTimedOut(), .none)
        _ = machine.received(request(#"{"type":"logout","id":9}"#), now: start)
        let served = machine.served(.success(RelayReply(auth: .signedOut)))
        XCTAssertTrue(served.signedOut)
        XCTAssertNil(machine.auth)
        XCTAssertEqual(machine.signInTimedOut(), .close(.policyViolation, "not authenticated in time"))
    }

    func testRequestsOverTheRateAreRefusedNotQueued() {
        var machine = machine { $0.requestsPerSecond = 2 }
        for _ in 0..<4 { XCTAssertEqual(machine.received(request(#"{"type":"ping"}"#), now: start), .replyOK(nil)) }
        XCTAssertEqual(machine.received(request(#"{"type":"ping","id":5}"#), now: start),
                       .replyError(ProtocolError(.rateLimited, "too many requests; slow down"), .int(5)))
        XCTAssertEqual(machine.received(request(#"{"type":"ping","id":6}"#), now: start + .seconds(1)), .replyOK(.int(6)),
                       "the bucket refills with time")
    }

    func testPingsCoalesceIntoOnePongForTheLatest() {
        var machine = machine()
        for byte in UInt8(1)...3 { XCTAssertEqual(machine.receivedPing(ByteBuffer(bytes: [byte]), now: start), .none) }
        XCTAssertNil(machine.pongToWrite(canWrite: false), "nothing is written to a client that does not read")
        XCTAssertEqual(machine.pongToWrite(canWrite: true), ByteBuffer(bytes: [3]))
        XCTAssertNil(machine.pongToWrite(canWrite: true), "one pong for the burst")
    }

    func testAControlFrameFloodCloses() {
        var machine = machine { $0.controlFramesPerSecond = 5 }
        for _ in 0..<10 { XCTAssertEqual(machine.receivedPong(now: start), .none) }
        XCTAssertEqual(machine.receivedPing(ByteBuffer(), now: start), .close(.policyViolation, "too many control frames"))
    }

    func testKeepalivePingsAndClosesIdleConnections() {
        var machine = machine { $0.idleTimeout = 90 }
        XCTAssertEqual(machine.keepalive(now: start + .seconds(25), canWrite: true), .ping)
        XCTAssertEqual(machine.keepalive(now: start + .seconds(25), canWrite: false), .none)
        machine.heard(at: start + .seconds(60))
        XCTAssertEqual(machine.keepalive(now: start + .seconds(140), canWrite: true), .ping)
        XCTAssertEqual(machine.keepalive(now: start + .seconds(151), canWrite: true), .close(.policyViolation, "idle for too long"))
    }

    func testASignInAnsweredAfterTheChannelClosedIsDetached() {
        var machine = machine()
        _ = machine.received(request(#"{"type":"hello","id":1,"token":"t"}"#), now: start)
        XCTAssertNil(machine.channelClosed(), "not signed in yet")
        let served = machine.served(.success(RelayReply([], auth: .authenticated(alice))))
        XCTAssertEqual(served.detach, .user(alice), "the relay attached a connection that is gone")
        XCTAssertNil(served.reply)
        XCTAssertNil(machine.nextWaiting())
    }

    func testClosingStopsServing() {
        var machine = signedIn()
        XCTAssertTrue(machine.startClosing())
        XCTAssertFalse(machine.startClosing())
        XCTAssertEqual(machine.received(request(#"{"type":"ping","id":1}"#), now: start), .none)
        XCTAssertEqual(machine.receivedPing(ByteBuffer(), now: start), .none)
        XCTAssertEqual(machine.keepalive(now: start + .seconds(1000), canWrite: true), .none)
        XCTAssertEqual(machine.channelClosed(), .user(alice), "closing keeps who to detach when the channel is gone")
        XCTAssertNil(machine.channelClosed(), "told once")
    }

    func testALogoutAnsweredWhileClosingLeavesNobodyToForget() {
        var machine = signedIn()
        _ = machine.received(request(#"{"type":"logout","id":9}"#), now: start)
        XCTAssertTrue(machine.startClosing())
        let served = machine.served(.success(RelayReply(auth: .signedOut)))
        XCTAssertNil(served.reply, "nothing is sent once closing")
        XCTAssertNil(served.detach)
        XCTAssertNil(machine.auth, "the relay detached alice when it signed her out")
        XCTAssertNil(machine.channelClosed())
    }

    func testASignInAsSomeoneElseAnsweredWhileClosingIsForgottenOnce() {
        let bob = Authentication(username: "bob", tokenHash: "b")
        var machine = signedIn()
        _ = machine.received(request(#"{"type":"hello","id":2,"token":"b"}"#), now: start)
        XCTAssertTrue(machine.startClosing())
        XCTAssertEqual(machine.state, .closing(.user(alice), serving: true))
        let served = machine.served(.success(RelayReply([], auth: .authenticated(bob))))
        XCTAssertEqual(served.detach, .user(bob), "the relay attached bob to a closing connection")
        XCTAssertNil(machine.channelClosed(), "signing in as bob detached alice: nobody is left")
    }

    func testAFailedRequestAnsweredWhileClosingKeepsWhoToForget() {
        var machine = signedIn()
        _ = machine.received(request(#"{"type":"friend.list","id":2}"#), now: start)
        XCTAssertTrue(machine.startClosing())
        let served = machine.served(.failure(.storage("disk")))
        XCTAssertNil(served.reply)
        XCTAssertNil(served.close, "already closing")
        XCTAssertEqual(machine.channelClosed(), .user(alice))
    }

    func testAClosedChannelServesUntilTheAnswerComes() {
        var machine = signedIn()
        _ = machine.received(request(#"{"type":"friend.list","id":2}"#), now: start)
        _ = machine.received(request(#"{"type":"friend.list","id":3}"#), now: start)
        XCTAssertEqual(machine.channelClosed(), .user(alice))
        XCTAssertEqual(machine.state, .closed(serving: true), "the handler keeps its handle until the answer")
        XCTAssertTrue(machine.isServing)
        _ = machine.served(.success(RelayReply()))
        XCTAssertEqual(machine.state, .closed(serving: false))
        XCTAssertNil(machine.nextWaiting(), "what waited is dropped with the channel")
        XCTAssertFalse(machine.startClosing(), "closed already")
    }

    func testTheKindOfRequestInFlightIsKept() {
        var machine = machine()
        _ = machine.received(request(#"{"type":"watch","id":1,"token":"tok"}"#), now: start)
        XCTAssertEqual(machine.state, .awaitingSignIn(serving: .watch))
        _ = machine.served(.failure(.storage("disk")))
        _ = machine.received(request(#"{"type":"login","id":2,"username":"alice","password":"pw"}"#), now: start)
        XCTAssertEqual(machine.state, .awaitingSignIn(serving: .signIn))
        _ = machine.served(.success(RelayReply([], auth: .authenticated(alice))))
        XCTAssertEqual(machine.state, .signedIn(alice, serving: false))
    }

    func testCloseCodesAnsweringAClientsCloseFrame() {
        XCTAssertEqual(ConnectionStateMachine.closeCode(answering: 1000, frameLength: 2, reasonIsUTF8: true), .normal)
        XCTAssertEqual(ConnectionStateMachine.closeCode(answering: nil, frameLength: 0, reasonIsUTF8: true), .normal)
        XCTAssertEqual(ConnectionStateMachine.closeCode(answering: nil, frameLength: 1, reasonIsUTF8: true), .protocolError)
        XCTAssertEqual(ConnectionStateMachine.closeCode(answering: 1005, frameLength: 2, reasonIsUTF8: true), .protocolError)
        XCTAssertEqual(ConnectionStateMachine.closeCode(answering: 4000, frameLength: 9, reasonIsUTF8: false), .invalidPayload)
    }
}
