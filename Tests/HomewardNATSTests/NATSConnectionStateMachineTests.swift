@testable import HomewardNATS
import NIOCore
import XCTest

final class NATSConnectionStateMachineTests: XCTestCase {
    typealias Machine = NATSConnectionStateMachine

    private func configuration(bufferLimit: Int = 1000, maxReconnects: Int? = nil) -> NATSClientConfiguration {
        var configuration = NATSClientConfiguration()
        configuration.reconnect = NATSReconnectBackoff(firstDelay: .milliseconds(100), maximumDelay: .seconds(1), jitter: 0)
        configuration.reconnectBufferLimit = bufferLimit
        configuration.maxPingsOutstanding = 2
        configuration.maxReconnectAttempts = maxReconnects
        return configuration
    }

    private let info = NATSServerInfo(serverID: "S", maxPayload: 100)

    /// Runs the handshake of `connection`: INFO, then the PONG to our PING.
    @discardableResult
    private func handshake(_ machine: inout Machine, connection: Int) -> Machine.PongAction {
        XCTAssertNotNil(machine.infoReceived(info, connection: connection))
        return machine.pongReceived(connection: connection)
    }

    /// A machine connected to server 0 with connection 1.
    private func connectedMachine(servers: Int = 2, bufferLimit: Int = 1000, maxReconnects: Int? = nil) -> Machine {
        var machine = Machine(serverCount: servers, configuration: configuration(bufferLimit: bufferLimit, maxReconnects: maxReconnects))
        XCTAssertEqual(machine.start(), .open(server: 0, connection: 1))
        XCTAssertEqual(handshake(&machine, connection: 1), .connected(server: 0, resubscribe: [], buffered: [], isReconnect: false))
        return machine
    }

    func testHandshakeIsInfoThenConnectThenPong() {
        var machine = Machine(serverCount: 1, configuration: configuration())
        XCTAssertEqual(machine.start(), .open(server: 0, connection: 1))
        XCTAssertEqual(machine.pongReceived(connection: 1), .none, "a PONG before INFO completes nothing")
        XCTAssertEqual(machine.infoReceived(info, connection: 1), 0, "INFO: send CONNECT and PING to server 0")
        XCTAssertFalse(machine.isConnected)
        XCTAssertEqual(machine.pongReceived(connection: 1), .connected(server: 0, resubscribe: [], buffered: [], isReconnect: false))
        XCTAssertTrue(machine.isConnected)
        XCTAssertNil(machine.infoReceived(info, connection: 1), "a later INFO starts no handshake")
    }

    func testFirstConnectTriesEachServerOnceThenFails() {
        var machine = Machine(serverCount: 2, configuration: configuration())
        XCTAssertEqual(machine.start(), .open(server: 0, connection: 1))
        XCTAssertEqual(machine.connectionFailed(connection: 1, reason: "refused"), .open(server: 1, connection: 2))
        XCTAssertEqual(machine.connectionFailed(connection: 1, reason: "late close of the first"), .none)
        XCTAssertEqual(machine.connectionFailed(connection: 2, reason: "refused"), .giveUp(.connectFailed("refused")))
        XCTAssertEqual(machine.state, .closed)
    }

    func testServerErrorDuringHandshakeFailsTheAttempt() {
        var machine = Machine(serverCount: 1, configuration: configuration())
        _ = machine.start()
        _ = machine.infoReceived(info, connection: 1)
        XCTAssertEqual(machine.serverErrorReceived("Authorization Violation", connection: 1),
                       .giveUp(.connectFailed("server error: Authorization Violation")))
    }

    func testServerErrorWhileConnectedOnlyGetsLogged() {
        var machine = connectedMachine()
        XCTAssertEqual(machine.serverErrorReceived("Permissions Violation", connection: 1), .none)
        XCTAssertTrue(machine.isConnected)
    }

    func testHandshakeTimeoutOnlyFailsAConnectionStillInItsHandshake() {
        var machine = connectedMachine()
        XCTAssertEqual(machine.handshakeTimedOut(connection: 1), .none, "a connected connection is not timed out")
        var starting = Machine(serverCount: 1, configuration: configuration())
        _ = starting.start()
        XCTAssertEqual(starting.handshakeTimedOut(connection: 1), .giveUp(.connectFailed("handshake timed out")))
    }

    func testLossReconnectsToTheNextServerWithBackoffAndResubscribesEverything() {
        var machine = connectedMachine()
        XCTAssertTrue(try machine.subscribe(.init(id: 1, subject: "a", queueGroup: nil)))
        XCTAssertTrue(try machine.subscribe(.init(id: 2, subject: "jobs", queueGroup: "workers")))
        XCTAssertEqual(machine.connectionFailed(connection: 1, reason: "closed", random: 0),
                       .lost(reason: "closed", retryAfter: .milliseconds(100), connection: 2))
        XCTAssertEqual(machine.retryTimerFired(connection: 99), .none, "a timer of another attempt")
        XCTAssertEqual(machine.retryTimerFired(connection: 2), .open(server: 1, connection: 2))
        XCTAssertEqual(machine.connectionFailed(connection: 2, reason: "refused", random: 0), .retry(after: .milliseconds(200), connection: 3))
        XCTAssertEqual(machine.retryTimerFired(connection: 3), .open(server: 0, connection: 3), "round robin back to server 0")
        XCTAssertFalse(try machine.subscribe(.init(id: 3, subject: "b.>", queueGroup: nil)), "no SUB while reconnecting")
        XCTAssertEqual(handshake(&machine, connection: 3), .connected(server: 0, resubscribe: [
            .init(id: 1, subject: "a", queueGroup: nil),
            .init(id: 2, subject: "jobs", queueGroup: "workers"),
            .init(id: 3, subject: "b.>", queueGroup: nil),
        ], buffered: [], isReconnect: true))
    }

    func testEventsOfAnOldConnectionAreIgnored() {
        var machine = connectedMachine()
        _ = machine.connectionFailed(connection: 1, reason: "closed")
        XCTAssertEqual(machine.connectionFailed(connection: 1, reason: "closed again"), .none)
        XCTAssertNil(machine.infoReceived(info, connection: 1))
        XCTAssertEqual(machine.pongReceived(connection: 1), .none)
        XCTAssertFalse(machine.isCurrent(1))
        XCTAssertEqual(machine.messageReceived(subscriptionID: 1, connection: 1), .discard)
    }

    func testPublishesWhileReconnectingAreBufferedUpToTheLimitThenSentInOrder() {
        var machine = connectedMachine(bufferLimit: 20)
        let frame = ByteBuffer(string: "PUB a 1\r\nx\r\n") // 12 bytes
        XCTAssertEqual(machine.publish(frame, payloadSize: 1), .write)
        _ = machine.connectionFailed(connection: 1, reason: "closed")
        let first = ByteBuffer(string: "PUB a 1\r\n1\r\n")
        XCTAssertEqual(machine.publish(first, payloadSize: 1), .buffered)
        XCTAssertEqual(machine.publish(frame, payloadSize: 1), .fail(.reconnectBufferFull(limit: 20)))
        let small = ByteBuffer(string: "PUB a 0\r\n\r\n") // 11 bytes: 23 > 20 too
        XCTAssertEqual(machine.publish(small, payloadSize: 0), .fail(.reconnectBufferFull(limit: 20)))
        XCTAssertEqual(machine.bufferedBytes, 12)
        _ = machine.retryTimerFired(connection: 2)
        XCTAssertEqual(handshake(&machine, connection: 2), .connected(server: 1, resubscribe: [], buffered: [first], isReconnect: true))
        XCTAssertEqual(machine.bufferedBytes, 0)
        XCTAssertEqual(machine.publish(frame, payloadSize: 1), .write)
    }

    func testPayloadOverTheServersMaxIsRefused() {
        var machine = connectedMachine()
        XCTAssertEqual(machine.publish(ByteBuffer(), payloadSize: 101), .fail(.payloadTooLarge(size: 101, limit: 100)))
        XCTAssertEqual(machine.publish(ByteBuffer(), payloadSize: 100), .write)
    }

    func testKeepalivePingsUntilTooManyAreUnansweredThenTheConnectionIsStale() {
        var machine = connectedMachine()
        XCTAssertEqual(machine.keepaliveTick(), .ping)
        XCTAssertEqual(machine.pongReceived(connection: 1), .pong)
        XCTAssertEqual(machine.keepaliveTick(), .ping)
        XCTAssertEqual(machine.keepaliveTick(), .ping)
        XCTAssertEqual(machine.keepaliveTick(), .stale(1))
        XCTAssertEqual(machine.connectionFailed(connection: 1, reason: "stale", random: 0),
                       .lost(reason: "stale", retryAfter: .milliseconds(100), connection: 2))
        XCTAssertEqual(machine.keepaliveTick(), .none, "no pings while reconnecting")
    }

    func testFlushNeedsALiveConnection() {
        var machine = connectedMachine()
        XCTAssertNil(machine.flushRequested())
        _ = machine.connectionFailed(connection: 1, reason: "closed")
        XCTAssertEqual(machine.flushRequested(), .notConnected)
        _ = machine.close()
        XCTAssertEqual(machine.flushRequested(), .closed)
    }

    func testAutoUnsubscribeEndsAfterMaxAndAReconnectAsksOnlyForWhatIsLeft() {
        var machine = connectedMachine()
        _ = try? machine.subscribe(.init(id: 7, subject: "a", queueGroup: nil))
        XCTAssertEqual(machine.messageReceived(subscriptionID: 7, connection: 1), .deliver(last: false))
        XCTAssertEqual(machine.unsubscribe(id: 7, afterMessages: 3), .init(send: true, finish: false))
        XCTAssertEqual(machine.messageReceived(subscriptionID: 7, connection: 1), .deliver(last: false))
        _ = machine.connectionFailed(connection: 1, reason: "closed")
        _ = machine.retryTimerFired(connection: 2)
        XCTAssertEqual(handshake(&machine, connection: 2), .connected(server: 1, resubscribe: [
            .init(id: 7, subject: "a", queueGroup: nil, maxMessages: 1, delivered: 2),
        ], buffered: [], isReconnect: true))
        XCTAssertEqual(machine.messageReceived(subscriptionID: 7, connection: 2), .deliver(last: true))
        XCTAssertEqual(machine.messageReceived(subscriptionID: 7, connection: 2), .discard)
        XCTAssertEqual(machine.unsubscribe(id: 7), .init(send: false, finish: false), "already gone")
    }

    func testUnsubscribeWithAMaxAlreadyReachedEndsNow() {
        var machine = connectedMachine()
        _ = try? machine.subscribe(.init(id: 1, subject: "a", queueGroup: nil))
        _ = machine.messageReceived(subscriptionID: 1, connection: 1)
        _ = machine.messageReceived(subscriptionID: 1, connection: 1)
        XCTAssertEqual(machine.unsubscribe(id: 1, afterMessages: 2), .init(send: true, finish: true))
    }

    func testReconnectGivesUpAfterTheAttemptLimit() {
        var machine = connectedMachine(servers: 1, maxReconnects: 2)
        _ = machine.connectionFailed(connection: 1, reason: "closed")
        _ = machine.retryTimerFired(connection: 2)
        XCTAssertEqual(machine.connectionFailed(connection: 2, reason: "refused", random: 0), .retry(after: .milliseconds(200), connection: 3))
        _ = machine.retryTimerFired(connection: 3)
        XCTAssertEqual(machine.connectionFailed(connection: 3, reason: "refused"),
                       .giveUp(.connectionLost("gave up after 2 reconnect attempts: refused")))
        XCTAssertEqual(machine.publish(ByteBuffer(), payloadSize: 0), .fail(.closed))
    }

    func testCloseEndsEverythingOnce() {
        var machine = connectedMachine()
        XCTAssertTrue(machine.close())
        XCTAssertFalse(machine.close())
        XCTAssertEqual(machine.publish(ByteBuffer(), payloadSize: 0), .fail(.closed))
        XCTAssertThrowsError(try machine.subscribe(.init(id: 1, subject: "a", queueGroup: nil)))
        XCTAssertEqual(machine.connectionFailed(connection: 1, reason: "closed"), .none)
    }
}
