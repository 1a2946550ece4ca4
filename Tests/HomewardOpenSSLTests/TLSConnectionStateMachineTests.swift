import HomewardOpenSSL
import XCTest

final class TLSConnectionStateMachineTests: XCTestCase {
    private func openMachine() -> TLSConnectionStateMachine {
        var machine = TLSConnectionStateMachine()
        _ = machine.handshakeStepped(.completed)
        return machine
    }

    func testBytesDuringTheHandshakeStepIt() {
        var machine = TLSConnectionStateMachine()
        XCTAssertEqual(machine.bytesReceived(), .stepHandshake)
        XCTAssertEqual(machine.handshakeStepped(.wantsMoreBytes), .sendHandshakeBytes)
        XCTAssertEqual(machine.state, .handshaking)
    }

    func testAFlushBeforeTheHandshakeCompletesIsHeldUntilItDoes() {
        var machine = TLSConnectionStateMachine()
        XCTAssertEqual(machine.writeRequested(), .holdWrite)
        XCTAssertEqual(machine.flushRequested(), .none)
        XCTAssertEqual(machine.handshakeStepped(.completed), .completeHandshake(flushWrites: true))
        XCTAssertEqual(machine.state, .open)
    }

    func testNoFlushBeforeTheHandshakeSendsNothingWhenItCompletes() {
        var machine = TLSConnectionStateMachine()
        XCTAssertEqual(machine.writeRequested(), .holdWrite)
        XCTAssertEqual(machine.handshakeStepped(.completed), .completeHandshake(flushWrites: false))
    }

    func testAFailedHandshakeClosesForGood() {
        var machine = TLSConnectionStateMachine()
        let error = TLSConnectionError.handshakeFailed(reason: "wrong version number")
        XCTAssertEqual(machine.handshakeStepped(.failed(error)), .fail(error))
        XCTAssertEqual(machine.state, .closed)
        XCTAssertEqual(machine.bytesReceived(), .discardInput)
        XCTAssertEqual(machine.writeRequested(), .failWrite(.closed))
    }

    func testOpenBytesAreDecryptedAndAFlushEncrypts() {
        var machine = openMachine()
        XCTAssertEqual(machine.bytesReceived(), .decrypt)
        XCTAssertEqual(machine.decrypted(.wantsMoreBytes), .sendPending)
        XCTAssertEqual(machine.writeRequested(), .holdWrite)
        XCTAssertEqual(machine.flushRequested(), .encryptAndSend)
    }

    func testThePeersCloseNotifyIsAnsweredAndCloses() {
        var machine = openMachine()
        XCTAssertEqual(machine.decrypted(.closeNotify), .answerCloseNotify)
        XCTAssertEqual(machine.state, .closed)
    }

    func testClosingSendsCloseNotifyAndWaitsForTheAnswer() {
        var machine = openMachine()
        XCTAssertEqual(machine.closeRequested(), .beginClose)
        XCTAssertEqual(machine.state, .closing)
        XCTAssertEqual(machine.closeRequested(), .joinClose)
        XCTAssertEqual(machine.writeRequested(), .failWrite(.closed))
        XCTAssertEqual(machine.bytesReceived(), .decrypt)
        XCTAssertEqual(machine.decrypted(.closeNotify), .finishClose)
        XCTAssertEqual(machine.state, .closed)
        XCTAssertEqual(machine.closeTimedOut(), .none)
    }

    func testAClosingPeerThatNeverAnswersIsClosedAtTheTimeout() {
        var machine = openMachine()
        _ = machine.closeRequested()
        XCTAssertEqual(machine.closeTimedOut(), .closeChannel)
        XCTAssertEqual(machine.state, .closed)
    }

    func testClosingDuringTheHandshakeClosesAtOnce() {
        var machine = TLSConnectionStateMachine()
        XCTAssertEqual(machine.closeRequested(), .closeChannel)
        XCTAssertEqual(machine.state, .closed)
    }

    func testTheTCPConnectionEndingInEachState() {
        var handshaking = TLSConnectionStateMachine()
        XCTAssertEqual(handshaking.channelInactive(), .connectionLost(.closedDuringHandshake))
        var open = openMachine()
        XCTAssertEqual(open.channelInactive(), .connectionLost(.uncleanShutdown))
        var closing = openMachine()
        _ = closing.closeRequested()
        XCTAssertEqual(closing.channelInactive(), .connectionLost(nil))
        XCTAssertEqual(closing.state, .closed)
    }

    func testABadRecordAfterTheHandshakeFails() {
        var machine = openMachine()
        let error = TLSConnectionError.protocolViolation(reason: "bad record mac")
        XCTAssertEqual(machine.decrypted(.failed(error)), .fail(error))
        XCTAssertEqual(machine.state, .closed)
    }
}
