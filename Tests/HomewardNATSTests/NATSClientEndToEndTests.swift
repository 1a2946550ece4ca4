@testable import HomewardNATS
import HomewardTestSupport
import NIOCore
import XCTest

/// The NATS client against a real nats-server on a loopback port (see `NATSServerProcess`).
final class NATSClientEndToEndTests: XCTestCase {
    private func startServer(configuration: String? = nil) async throws -> NATSServerProcess {
        let server = try await NATSServerProcess.start(configuration: configuration)
        addTeardownBlock { server.stop() }
        return server
    }

    private func connect(_ urls: [String], configuration: NATSClientConfiguration = .fastReconnect) async throws -> NATSClient {
        let client = try await NATSClient.connect(urls: urls, configuration: configuration)
        addTeardownBlock { await client.close() }
        return client
    }

    private func publish(_ client: NATSClient, _ subject: String, _ texts: [String]) async throws {
        for text in texts { try await client.publish(subject: subject, payload: ByteBuffer(string: text)) }
    }

    /// The next `count` payloads of `subscription`, as text.
    private func receive(_ subscription: NATSSubscription, _ count: Int, within seconds: Double = 10) async throws -> [String] {
        try await withTimeout(seconds, "\(count) messages on \(subscription.subject)") {
            var texts: [String] = []
            guard count > 0 else { return texts }
            for await message in subscription {
                texts.append(message.payloadString)
                if texts.count == count { break }
            }
            return texts
        }
    }

    /// Everything left in a subscription that has ended (unsubscribed, max reached, client closed).
    private func remaining(_ subscription: NATSSubscription) async throws -> [String] {
        try await withTimeout(10, "\(subscription.subject) to end") {
            var texts: [String] = []
            for await message in subscription { texts.append(message.payloadString) }
            return texts
        }
    }

    private func nextEvent(_ client: NATSClient, within seconds: Double = 10) async throws -> NATSClientEvent {
        try await withTimeout(seconds, "a client event") {
            for await event in client.events { return event }
            throw TestFailure("the client's events ended")
        }
    }

    // MARK: Publish and subscribe

    func testPublishReachesASubscriberOnAnotherConnection() async throws {
        let server = try await startServer()
        let subscriber = try await connect([server.url])
        let publisher = try await connect([server.url])
        let subscription = try await subscriber.subscribe(subject: "walker.*")
        try await subscriber.flush()
        try await publisher.publish(subject: "walker.ann", payload: ByteBuffer(string: "{\"lat\":57.7}"), replyTo: "answers.1")
        let message = try await withTimeout(10, "the message") {
            for await message in subscription { return message }
            throw TestFailure("subscription ended")
        }
        XCTAssertEqual(message.subject, "walker.ann")
        XCTAssertEqual(message.replyTo, "answers.1")
        XCTAssertEqual(message.payloadString, "{\"lat\":57.7}")
        XCTAssertEqual(subscription.droppedMessages, 0)
    }

    func testManyMessagesArriveAllAndInOrder() async throws {
        let server = try await startServer()
        let subscriber = try await connect([server.url])
        let publisher = try await connect([server.url])
        let subscription = try await subscriber.subscribe(subject: "walker.ann")
        try await subscriber.flush()
        let texts = (1...5000).map { "position \($0)" }
        try await publish(publisher, "walker.ann", texts)
        let received = try await receive(subscription, texts.count)
        XCTAssertEqual(received, texts)
    }

    func testPayloadsWithCRLFAndEmptyPayloadsArriveIntact() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let subscription = try await client.subscribe(subject: "odd")
        let texts = ["", "a\r\nb", "\r\n", "MSG odd 1 3\r\nabc\r\n", "PING\r\n", "", String(repeating: "x\r\n", count: 10_000)]
        try await publish(client, "odd", texts)
        try await assertEqual(try await receive(subscription, texts.count), texts)
    }

    func testQueueGroupGivesEachMessageToOneMemberWhileAPlainSubscriberGetsAll() async throws {
        let server = try await startServer()
        let workers = try await connect([server.url])
        let observer = try await connect([server.url])
        let publisher = try await connect([server.url])
        let first = try await workers.subscribe(subject: "jobs", queueGroup: "workers")
        let second = try await workers.subscribe(subject: "jobs", queueGroup: "workers")
        let all = try await observer.subscribe(subject: "jobs")
        try await workers.flush()
        try await observer.flush()
        let texts = (1...40).map { "job \($0)" }
        try await publish(publisher, "jobs", texts)
        try await publisher.flush()
        // The server has routed everything; each subscriber's PONG comes after its messages.
        try await workers.flush()
        try await observer.flush()
        await first.unsubscribe()
        await second.unsubscribe()
        await all.unsubscribe()
        let (one, two) = (try await remaining(first), try await remaining(second))
        XCTAssertEqual(one.count + two.count, texts.count, "each job exactly once in the group")
        XCTAssertEqual(Set(one + two), Set(texts))
        XCTAssertFalse(one.isEmpty || two.isEmpty, "both members got work: \(one.count) and \(two.count)")
        try await assertEqual(try await remaining(all), texts)
    }

    func testUnsubscribeStopsDeliveryAndEndsTheSequence() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let leaving = try await client.subscribe(subject: "news")
        let staying = try await client.subscribe(subject: "news")
        try await publish(client, "news", ["1"])
        try await client.flush()
        await leaving.unsubscribe()
        try await publish(client, "news", ["2"])
        try await assertEqual(try await receive(staying, 2), ["1", "2"], "both were published")
        try await assertEqual(try await remaining(leaving), ["1"], "nothing after unsubscribe, and the loop ended")
    }

    func testUnsubscribeAfterMessagesEndsAfterThatManyInTotal() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let subscription = try await client.subscribe(subject: "few")
        try await publish(client, "few", ["1"])
        try await client.flush()
        await subscription.unsubscribe(afterMessages: 3)
        try await publish(client, "few", ["2", "3", "4", "5"])
        try await assertEqual(try await remaining(subscription), ["1", "2", "3"])
    }

    // MARK: Request-reply

    func testRequestGetsItsReplyAndConcurrentRequestsGetTheirOwn() async throws {
        let server = try await startServer()
        let responder = try await connect([server.url])
        let requester = try await connect([server.url])
        let requests = try await responder.subscribe(subject: "svc.echo")
        let serving = Task {
            for await request in requests {
                guard let replyTo = request.replyTo else { continue }
                try await responder.publish(subject: replyTo, payload: ByteBuffer(string: "echo " + request.payloadString))
            }
        }
        defer { serving.cancel() }
        try await responder.flush()
        let reply = try await requester.request(subject: "svc.echo", payload: ByteBuffer(string: "hi"), timeout: .seconds(5))
        XCTAssertEqual(reply.payloadString, "echo hi")
        let replies = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for index in 0..<50 {
                group.addTask {
                    let reply = try await requester.request(subject: "svc.echo", payload: ByteBuffer(string: "\(index)"), timeout: .seconds(5))
                    return (index, reply.payloadString)
                }
            }
            return try await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
        }
        XCTAssertEqual(replies, Dictionary(uniqueKeysWithValues: (0..<50).map { ($0, "echo \($0)") }))
    }

    func testRequestWithoutResponderTimesOut() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let started = ContinuousClock.now
        do {
            _ = try await client.request(subject: "svc.nobody", payload: ByteBuffer(string: "?"), timeout: .milliseconds(300))
            XCTFail("a request nobody answers returned")
        } catch let error as NATSError {
            XCTAssertEqual(error, .timeout)
        }
        let waited = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(290))
        XCTAssertLessThan(waited, .seconds(3))
        // The client is still fine afterwards.
        let subscription = try await client.subscribe(subject: "after")
        try await publish(client, "after", ["ok"])
        try await assertEqual(try await receive(subscription, 1), ["ok"])
    }

    func testCancellingTheTaskThatAwaitsARequestEndsTheWait() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let waiting = Task { try await client.request(subject: "svc.nobody", payload: ByteBuffer(), timeout: .seconds(60)) }
        try await client.flush() // the request is out, and waiting
        waiting.cancel()
        let outcome = try await withTimeout(5, "the cancelled request to end") { await waiting.result }
        XCTAssertThrowsError(try outcome.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
    }

    func testAConsumerWhoseTaskIsCancelledUnsubscribes() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let subscription = try await client.subscribe(subject: "walker.ann")
        let kept = try await client.subscribe(subject: "walker.ben")
        let consumer = Task { for await _ in subscription {} }
        consumer.cancel()
        await consumer.value
        let live = await client.subscriptionIDs()
        XCTAssertEqual(live, [kept.id])
    }

    // MARK: Reconnects

    func testServerRestartReconnectsResubscribesAndSendsWhatWasPublishedMeanwhile() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let subscription = try await client.subscribe(subject: "walker.ann")
        let queued = try await client.subscribe(subject: "jobs", queueGroup: "workers")
        try await publish(client, "walker.ann", ["before"])
        try await assertEqual(try await receive(subscription, 1), ["before"])

        server.kill()
        guard case .disconnected = try await nextEvent(client) else { return XCTFail("expected a disconnect") }
        let connected = await client.isConnected
        XCTAssertFalse(connected)
        try await publish(client, "walker.ann", ["while down 1", "while down 2"])
        try await server.restart()
        try await assertEqual(try await nextEvent(client), .reconnected(NATSServerAddress(host: "127.0.0.1", port: server.port)))

        // The subscriptions are back on the new server: another client's messages reach them.
        let other = try await connect([server.url])
        try await publish(other, "walker.ann", ["after"])
        try await publish(other, "jobs", ["job after"])
        try await assertEqual(try await receive(subscription, 3), ["while down 1", "while down 2", "after"])
        try await assertEqual(try await receive(queued, 1), ["job after"])
    }

    func testLosingOneOfSeveralServersMovesToTheNext() async throws {
        let first = try await startServer()
        let second = try await startServer()
        let client = try await connect([first.url, second.url])
        let subscription = try await client.subscribe(subject: "walker.ann")
        try await client.flush()
        first.kill()
        guard case .disconnected = try await nextEvent(client) else { return XCTFail("expected a disconnect") }
        try await assertEqual(try await nextEvent(client), .reconnected(NATSServerAddress(host: "127.0.0.1", port: second.port)))
        let publisher = try await connect([second.url])
        try await publish(publisher, "walker.ann", ["on the second server"])
        try await assertEqual(try await receive(subscription, 1), ["on the second server"])
    }

    func testFirstConnectSkipsADeadServer() async throws {
        let dead = try await startServer()
        dead.kill()
        let live = try await startServer()
        let client = try await connect([dead.url, live.url])
        let subscription = try await client.subscribe(subject: "x")
        try await publish(client, "x", ["reached"])
        try await assertEqual(try await receive(subscription, 1), ["reached"])
    }

    func testPublishesWhileDisconnectedFailOnceTheBufferIsFull() async throws {
        let server = try await startServer()
        var configuration = NATSClientConfiguration.fastReconnect
        configuration.reconnectBufferLimit = 100
        configuration.reconnect = NATSReconnectBackoff(firstDelay: .seconds(30), maximumDelay: .seconds(30))
        let client = try await connect([server.url], configuration: configuration)
        server.kill()
        guard case .disconnected = try await nextEvent(client) else { return XCTFail("expected a disconnect") }
        let payload = ByteBuffer(string: String(repeating: "p", count: 50)) // "PUB a 50\r\n" + 50 + CRLF = 62 bytes
        try await client.publish(subject: "a", payload: payload)
        do {
            try await client.publish(subject: "a", payload: payload)
            XCTFail("the second publish fit a 100-byte buffer")
        } catch let error as NATSError {
            XCTAssertEqual(error, .reconnectBufferFull(limit: 100))
        }
        do {
            try await client.flush()
            XCTFail("flush while disconnected returned")
        } catch let error as NATSError {
            XCTAssertEqual(error, .notConnected)
        }
    }

    // MARK: Keepalive

    /// Waits `seconds` for a client event and asserts there is none. Only time can show that something
    /// does not happen; the window is long enough for what would happen if the feature broke.
    private func assertNoEvent(_ client: NATSClient, for seconds: Double, _ message: String) async throws {
        let event = try await withThrowingTaskGroup(of: NATSClientEvent?.self) { group in
            group.addTask { for await event in client.events { return event }; return nil }
            group.addTask { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))); return nil }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        XCTAssertNil(event, message)
    }

    func testServerPingsAreAnsweredSoAnIdleConnectionStays() async throws {
        // The server pings an idle client every 200 ms and drops it when two PINGs go unanswered.
        let server = try await startServer(configuration: "ping_interval: \"200ms\"\nping_max: 2\n")
        var configuration = NATSClientConfiguration.fastReconnect
        configuration.pingInterval = .hours(1) // no pings of our own: those would count as traffic
        let client = try await connect([server.url], configuration: configuration)
        try await assertNoEvent(client, for: 1.2, "unanswered server PINGs would have dropped the connection within 0.7 s")
        let subscription = try await client.subscribe(subject: "still")
        try await publish(client, "still", ["here"])
        try await assertEqual(try await receive(subscription, 1), ["here"])
    }

    func testOurKeepalivePingsGetPongsAndAHealthyConnectionIsNotCalledStale() async throws {
        let server = try await startServer()
        var configuration = NATSClientConfiguration.fastReconnect
        configuration.pingInterval = .milliseconds(100)
        configuration.maxPingsOutstanding = 2 // PONGs not credited would make the third tick (0.3 s) drop the connection
        let client = try await connect([server.url], configuration: configuration)
        try await assertNoEvent(client, for: 0.7, "the connection was dropped as stale although the server answered")
        let connected = await client.isConnected
        XCTAssertTrue(connected)
    }

    // MARK: Slow consumers

    func testASlowConsumerLosesTheOldestMessagesAndSeesHowMany() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let newest = try await client.subscribe(subject: "fast", bufferLimit: 10)
        let oldest = try await client.subscribe(subject: "fast", bufferLimit: 10, overflow: .dropNewest)
        try await publish(client, "fast", (1...100).map(String.init))
        try await client.flush() // the PONG comes after all 100 messages
        XCTAssertEqual(newest.droppedMessages, 90)
        XCTAssertEqual(oldest.droppedMessages, 90)
        try await assertEqual(try await receive(newest, 10), (91...100).map(String.init))
        try await assertEqual(try await receive(oldest, 10), (1...10).map(String.init))
        // Once it has caught up, nothing more is dropped.
        try await publish(client, "fast", ["101"])
        try await assertEqual(try await receive(newest, 1), ["101"])
        XCTAssertEqual(newest.droppedMessages, 90)
    }

    // MARK: Bad input and closing

    func testBadURLsAndUnreachableServersAreClearErrors() async throws {
        await assertNATSError(.noServers) { _ = try await NATSClient.connect(urls: []) }
        await assertNATSError(.invalidURL("http://127.0.0.1:4222")) { _ = try await NATSClient.connect(urls: ["http://127.0.0.1:4222"]) }
        let dead = try await startServer()
        dead.kill()
        do {
            _ = try await NATSClient.connect(urls: [dead.url], configuration: NATSClientConfiguration.fastReconnect)
            XCTFail("connected to a stopped server")
        } catch NATSError.connectFailed(let reason) {
            XCTAssertTrue(reason.contains("127.0.0.1:\(dead.port)"), reason)
        }
    }

    func testBadSubjectsAndOversizedPayloadsAreRefusedAndTheConnectionStaysUsable() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        await assertNATSError(.invalidSubject("a b")) { try await client.publish(subject: "a b", payload: ByteBuffer()) }
        await assertNATSError(.invalidSubject("a.*")) { try await client.publish(subject: "a.*", payload: ByteBuffer()) }
        await assertNATSError(.invalidSubject("x\r\nPUB y 0")) { _ = try await client.subscribe(subject: "x\r\nPUB y 0") }
        await assertNATSError(.invalidQueueGroup("two words")) { _ = try await client.subscribe(subject: "x", queueGroup: "two words") }
        let tooLarge = ByteBuffer(repeating: 0x61, count: 1024 * 1024 + 1) // nats-server's default max_payload is 1 MiB
        await assertNATSError(.payloadTooLarge(size: tooLarge.readableBytes, limit: 1024 * 1024)) {
            try await client.publish(subject: "big", payload: tooLarge)
        }
        let subscription = try await client.subscribe(subject: "big")
        try await client.publish(subject: "big", payload: ByteBuffer(repeating: 0x61, count: 1024 * 1024))
        let received = try await withTimeout(10, "the 1 MiB message") {
            for await message in subscription { return message.payload.readableBytes }
            return 0
        }
        XCTAssertEqual(received, 1024 * 1024)
        let connected = await client.isConnected
        XCTAssertTrue(connected)
    }

    func testCloseEndsSubscriptionsAndLaterCallsFailWithClosed() async throws {
        let server = try await startServer()
        let client = try await connect([server.url])
        let subscription = try await client.subscribe(subject: "walker.ann")
        try await publish(client, "walker.ann", ["last"])
        try await client.flush()
        await client.close()
        try await assertEqual(try await remaining(subscription), ["last"], "buffered messages are still delivered, then the loop ends")
        try await assertEqual(try await nextEvent(client), .closed(nil))
        await assertNATSError(.closed) { try await client.publish(subject: "a", payload: ByteBuffer()) }
        await assertNATSError(.closed) { _ = try await client.subscribe(subject: "a") }
        await assertNATSError(.closed) { _ = try await client.request(subject: "a", payload: ByteBuffer(), timeout: .seconds(1)) }
        await client.close() // twice is harmless
    }

    /// `XCTAssertEqual` for an async expression, which its autoclosure cannot take.
    private func assertEqual<T: Equatable>(_ actual: @autoclosure () async throws -> T, _ expected: T, _ message: String = "",
                                           file: StaticString = #filePath, line: UInt = #line) async throws {
        let value = try await actual()
        XCTAssertEqual(value, expected, message, file: file, line: line)
    }

    private func assertNATSError(_ expected: NATSError, file: StaticString = #filePath, line: UInt = #line,
                                 _ body: () async throws -> Void) async {
        do {
            try await body()
            XCTFail("expected \(expected)", file: file, line: line)
        } catch {
            XCTAssertEqual(error as? NATSError, expected, file: file, line: line)
        }
    }
}
