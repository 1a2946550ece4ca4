import HomewardCore
import HomewardProtocol
import NIOCore
@testable import HomewardServer
import XCTest

/// The viewer phase of `ConnectionStateMachine` (protocol 1.1 share links), driven as a value.
final class ViewerPhaseTests: XCTestCase {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let viewerKey = "share:sh_1"

    private func request(_ text: String) -> IncomingRequest {
        IncomingRequest.parse(Array(text.utf8), now: 1_763_830_000_000)
    }

    private func watching() -> ConnectionStateMachine {
        var machine = ConnectionStateMachine(limits: ConnectionLimits(), now: start)
        XCTAssertEqual(machine.received(request(#"{"type":"watch","id":1,"token":"tok"}"#), now: start),
                       .serve(.watch(token: "tok"), auth: nil, id: .int(1)))
        let served = machine.served(.success(RelayReply([], auth: .watching(viewerKey: viewerKey))))
        XCTAssertTrue(served.signedIn, "the sign-in timer stops and the unauthenticated slot is released")
        XCTAssertNil(served.close)
        return machine
    }

    func testWatchIsServedBeforeSignInAndMakesAViewer() {
        let machine = watching()
        XCTAssertEqual(machine.viewer, viewerKey)
        XCTAssertNil(machine.auth, "a viewer is not signed in as anyone")
        XCTAssertEqual(machine.signInTimedOut(), .none, "a viewer owes no sign-in")
    }

    func testEveryRequestOfAViewerIsForbiddenAndTheConnectionStays() {
        var machine = watching()
        let forbidden = ProtocolError(.forbidden, "a share-link viewer can only watch")
        for (id, text) in [
            #"{"type":"friend.list","id":2}"#, #"{"type":"pos","id":3,"lat":1,"lon":2}"#, #"{"type":"ping","id":4}"#,
            #"{"type":"hello","id":5,"token":"t"}"#, #"{"type":"watch","id":6,"token":"tok"}"#, #"{"type":"nonsense","id":7}"#,
        ].enumerated() {
            XCTAssertEqual(machine.received(request(text), now: start), .replyError(forbidden, .int(Int64(id + 2))), text)
        }
        XCTAssertFalse(machine.isClosing)
        XCTAssertEqual(machine.viewer, viewerKey, "still watching")
    }

    func testAFailedWatchClosesWith1008() {
        for error in [RelayError.notFound("no such share link"), .rateLimited("too many")] {
            var machine = ConnectionStateMachine(limits: ConnectionLimits(), now: start)
            _ = machine.received(request(#"{"type":"watch","id":1,"token":"bad"}"#), now: start)
            let served = machine.served(.failure(error))
            XCTAssertEqual(served.reply.map { (try? $0.get()) == nil }, true)
            XCTAssertEqual(served.close?.code, .policyViolation, "\(error)")
            XCTAssertNil(machine.viewer)
        }
    }

    func testOtherFailuresDoNotCloseAndASignInFailureAfterAWatchDoesNotEither() {
        var machine = ConnectionStateMachine(limits: ConnectionLimits(), now: start)
        _ = machine.received(request(#"{"type":"watch","id":1,"token":"t"}"#), now: start)
        XCTAssertNil(machine.served(.failure(.storage("disk"))).close, "internal: the client may retry")
        _ = machine.received(request(#"{"type":"hello","id":2,"token":"t"}"#), now: start)
        XCTAssertNil(machine.served(.failure(.notFound("x"))).close, "only a watch's failure closes")
    }

    func testASignedInConnectionCannotWatch() {
        var machine = ConnectionStateMachine(limits: ConnectionLimits(), now: start)
        _ = machine.received(request(#"{"type":"hello","id":1,"token":"t"}"#), now: start)
        _ = machine.served(.success(RelayReply([], auth: .authenticated(Authentication(username: "alice", tokenHash: "h")))))
        XCTAssertEqual(machine.received(request(#"{"type":"watch","id":2,"token":"tok"}"#), now: start),
                       .replyError(ProtocolError(.forbidden, "a signed-in connection cannot watch; open another connection"), .int(2)))
    }

    func testTheViewerIsForgottenOnceWhenTheChannelCloses() {
        var machine = watching()
        XCTAssertEqual(machine.channelClosed(), .viewer(key: viewerKey))
        XCTAssertNil(machine.channelClosed(), "told once")
    }

    func testAWatchAnsweredAfterTheChannelClosedIsUndone() {
        var machine = ConnectionStateMachine(limits: ConnectionLimits(), now: start)
        _ = machine.received(request(#"{"type":"watch","id":1,"token":"tok"}"#), now: start)
        XCTAssertNil(machine.channelClosed())
        let served = machine.served(.success(RelayReply([], auth: .watching(viewerKey: viewerKey))))
        XCTAssertEqual(served.detach, .viewer(key: viewerKey))
        XCTAssertNil(served.reply)
    }
}
