@testable import HomewardNATS
import HomewardTestSupport
import NIOCore
import NIOPosix
import Synchronization
import XCTest

/// The client's two paths for a relay's positions, against a real nats-server: `publishDetached` writes what
/// was handed over meanwhile with one flush, and a handler subscription is called on the client's loop.
final class NATSClientFastPathTests: XCTestCase {
    private func startServer() async throws -> NATSServerProcess {
        let server = try await NATSServerProcess.start()
        addTeardownBlock { server.stop() }
        return server
    }

    private func connect(_ server: NATSServerProcess) async throws -> NATSClient {
        let client = try await NATSClient.connect(urls: [server.url], configuration: .fastReconnect)
        addTeardownBlock { await client.close() }
        return client
    }

    /// The next `count` payloads of `subscription`, as text.
    private func receive(_ subscription: NATSSubscription, _ count: Int) async throws -> [String] {
        try await withTimeout(10, "\(count) messages on \(subscription.subject)") {
            var texts: [String] = []
            for await message in subscription {
                texts.append(message.payloadString)
                if texts.count == count { break }
            }
            return texts
        }
    }

    /// A handler subscription whose messages (text, and whether the handler ran on the client's loop) are read
    /// from the returned stream.
    private func subscribeHandler(_ client: NATSClient, _ subject: String) async throws
        -> (NATSHandlerSubscription, AsyncStream<(text: String, onClientLoop: Bool)>) {
        let (stream, input) = AsyncStream.makeStream(of: (text: String, onClientLoop: Bool).self)
        let loop = client.eventLoop
        let subscription = try await client.subscribe(subject: subject) { message in
            input.yield((message.payloadString, loop.inEventLoop))
        }
        return (subscription, stream)
    }

    private func take(_ count: Int, from stream: AsyncStream<(text: String, onClientLoop: Bool)>) async throws
        -> [(text: String, onClientLoop: Bool)] {
        try await withTimeout(10, "\(count) messages") {
            var taken: [(text: String, onClientLoop: Bool)] = []
            for await item in stream {
                taken.append(item)
                if taken.count == count { break }
            }
            return taken
        }
    }

    // MARK: publishDetached

    func testDetachedPublishesOfOneLoopTurnGoOutInOneWriteAndInOrder() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server)
        let subscription = try await subscriber.subscribe(subject: "hw.pos.ann")
        try await subscriber.flush()
        let texts = (1...50).map { "position \($0)" }
        let before = await publisher.socketFlushCount()
        // One turn of the publisher's loop, as a relay's event loop reading many walkers' positions at once.
        try await publisher.eventLoop.submit {
            for text in texts { publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: text)) }
        }.get()
        try await publisher.flush()
        let flushes = await publisher.socketFlushCount() - before
        XCTAssertEqual(flushes, 2, "one write for the 50 positions, one for the PING of flush()")
        let received = try await receive(subscription, texts.count)
        XCTAssertEqual(received, texts)
        XCTAssertEqual(publisher.droppedPublishes, 0)
    }

    func testDetachedPublishesFromManyThreadsAllArriveInEachThreadsOrder() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server)
        let subscription = try await subscriber.subscribe(subject: "hw.pos.*")
        try await subscriber.flush()
        let walkers = ["ann", "bob", "cid", "dee"]
        let perWalker = 500
        // Each walker from its own thread, as walkers on different event loops publish at once.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: walkers.count)
        addTeardownBlock { try? await group.shutdownGracefully() }
        let loops = Array(group.makeIterator())
        let before = await publisher.socketFlushCount()
        for (walker, loop) in zip(walkers, loops) {
            loop.execute {
                for index in 1...perWalker {
                    publisher.publishDetached(subject: "hw.pos.\(walker)", payload: ByteBuffer(string: "\(walker) \(index)"))
                }
            }
        }
        let received = try await withTimeout(10, "every position") {
            var texts: [String] = []
            for await message in subscription {
                texts.append(message.payloadString)
                if texts.count == walkers.count * perWalker { break }
            }
            return texts
        }
        for walker in walkers {
            XCTAssertEqual(received.filter { $0.hasPrefix("\(walker) ") }, (1...perWalker).map { "\(walker) \($0)" }, "\(walker)'s in order")
        }
        let flushes = await publisher.socketFlushCount() - before
        XCTAssertLessThanOrEqual(flushes, walkers.count * perWalker, "never more than one write per message")
        XCTAssertEqual(publisher.droppedPublishes, 0)
    }

    func testADetachedPublishIsOnTheWireBeforeAFlushCalledAfterIt() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server)
        let subscription = try await subscriber.subscribe(subject: "hw.changes")
        try await subscriber.flush()
        publisher.publishDetached(subject: "hw.changes", payload: ByteBuffer(string: "notice"))
        try await publisher.flush()
        // The server had the PUB before the PING: a PING round trip on the subscriber's connection now finds it sent.
        try await subscriber.flush()
        XCTAssertEqual(subscription.receivedMessages, 1)
        let received = try await receive(subscription, 1)
        XCTAssertEqual(received, ["notice"])
    }

    // MARK: detachedWriteInterval

    /// A publisher that writes detached messages at most once per `interval` (long enough that, within a test,
    /// only a quiet moment or another call writes them).
    private func connect(_ server: NATSServerProcess, detachedWriteInterval interval: TimeAmount) async throws -> NATSClient {
        var configuration = NATSClientConfiguration.fastReconnect
        configuration.detachedWriteInterval = interval
        let client = try await NATSClient.connect(urls: [server.url], configuration: configuration)
        addTeardownBlock { await client.close() }
        return client
    }

    func testWithAWriteIntervalADetachedPublishAfterAQuietMomentGoesAtOnce() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server, detachedWriteInterval: .milliseconds(50))
        let subscription = try await subscriber.subscribe(subject: "hw.pos.ann")
        try await subscriber.flush()
        let started = ContinuousClock.now
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "first"))
        let received = try await receive(subscription, 1)
        XCTAssertEqual(received, ["first"])
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(50), "nothing was written before it: no wait")
    }

    func testWithAWriteIntervalDetachedPublishesSoonAfterAWriteWaitAndGoOutTogether() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server, detachedWriteInterval: .milliseconds(300))
        let subscription = try await subscriber.subscribe(subject: "hw.pos.*")
        try await subscriber.flush()
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "ann 1"))
        let first = try await receive(subscription, 1)
        XCTAssertEqual(first, ["ann 1"])
        let before = await publisher.socketFlushCount()
        let waited = ContinuousClock.now
        // Each in its own turn of the client's loop: without the interval, one write each.
        let later = ["bob 1", "ann 2", "cid 1", "ann 3"]
        for text in later {
            try await publisher.eventLoop.submit {
                publisher.publishDetached(subject: "hw.pos.\(text.prefix(3))", payload: ByteBuffer(string: text))
            }.get()
        }
        let rest = try await receive(subscription, later.count)
        XCTAssertEqual(rest, later, "in the order handed over")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - waited, .milliseconds(200), "held until the interval since the first write")
        let flushes = await publisher.socketFlushCount() - before
        XCTAssertEqual(flushes, 1, "one write for the four")
        XCTAssertEqual(publisher.droppedPublishes, 0)
    }

    func testWithAWriteIntervalEveryOtherCallWritesWhatWaitsFirst() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        // Far longer than the test: only the calls below write what waits.
        let publisher = try await connect(server, detachedWriteInterval: .seconds(60))
        let subscription = try await subscriber.subscribe(subject: "hw.>")
        try await subscriber.flush()
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "position 1"))
        let first = try await receive(subscription, 1)
        XCTAssertEqual(first, ["position 1"])
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "position 2"))
        try await publisher.publish(subject: "hw.changes", payload: ByteBuffer(string: "notice 1"))
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "position 3"))
        _ = try? await publisher.request(subject: "hw.last.ann", payload: ByteBuffer(string: "asked"), timeout: .milliseconds(1))
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "position 4"))
        let walker = try await publisher.subscribe(subject: "hw.pos.bob")
        publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: "position 5"))
        await walker.unsubscribe()
        publisher.publishDetached(subject: "hw.changes", payload: ByteBuffer(string: "notice 2"))
        try await publisher.flush()
        // The flush's PONG came after every message above reached the server: the subscriber has them all.
        try await subscriber.flush()
        let received = try await receive(subscription, 7)
        XCTAssertEqual(received, ["position 2", "notice 1", "position 3", "asked", "position 4", "position 5", "notice 2"])
    }

    func testDetachedPublishesWrittenTogetherInOneBufferArriveWholeAndInOrder() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server)
        let subscription = try await subscriber.subscribe(subject: "hw.pos.*")
        try await subscriber.flush()
        let big = String(repeating: "x", count: 2_000)
        let texts = ["a", big, "", "b\r\nc"]
        try await publisher.eventLoop.submit {
            for (index, text) in texts.enumerated() { publisher.publishDetached(subject: "hw.pos.w\(index)", payload: ByteBuffer(string: text)) }
        }.get()
        let received = try await receive(subscription, texts.count)
        XCTAssertEqual(received, texts, "each message whole, in order")
    }

    // MARK: Handler subscriptions

    func testAHandlerSubscriptionGetsEachMessageOnTheClientsLoopInOrder() async throws {
        let server = try await startServer()
        let subscriber = try await connect(server)
        let publisher = try await connect(server)
        let (subscription, messages) = try await subscribeHandler(subscriber, "hw.pos.ann")
        try await subscriber.flush()
        let texts = (1...2000).map { "position \($0)" }
        for text in texts { publisher.publishDetached(subject: "hw.pos.ann", payload: ByteBuffer(string: text)) }
        let received = try await take(texts.count, from: messages)
        XCTAssertEqual(received.map(\.text), texts)
        XCTAssertTrue(received.allSatisfy(\.onClientLoop), "called on the client's event loop, not from a task")
        XCTAssertEqual(subscription.receivedMessages, texts.count)
    }

    func testAHandlerIsNotCalledAfterUnsubscribe() async throws {
        let server = try await startServer()
        let client = try await connect(server)
        let (leaving, messages) = try await subscribeHandler(client, "news")
        let staying = try await client.subscribe(subject: "news")
        try await client.publish(subject: "news", payload: ByteBuffer(string: "1"))
        let first = try await take(1, from: messages)
        XCTAssertEqual(first.map(\.text), ["1"])
        await leaving.unsubscribe()
        try await client.publish(subject: "news", payload: ByteBuffer(string: "2"))
        let both = try await receive(staying, 2)
        XCTAssertEqual(both, ["1", "2"], "both were published")
        // One connection, in order: "2" reached the handler subscription before the PONG, had it still been there.
        try await client.flush()
        XCTAssertEqual(leaving.receivedMessages, 1, "nothing after unsubscribe")
    }

    func testAHandlerSubscriptionComesBackAfterAServerRestart() async throws {
        let server = try await startServer()
        let client = try await connect(server)
        let (_, messages) = try await subscribeHandler(client, "hw.pos.ann")
        try await client.publish(subject: "hw.pos.ann", payload: ByteBuffer(string: "before"))
        let before = try await take(1, from: messages)
        XCTAssertEqual(before.map(\.text), ["before"])
        try await server.restart()
        try await withTimeout(10, "the reconnect") {
            for await event in client.events { if case .reconnected = event { return } }
            throw TestFailure("the client's events ended")
        }
        // The subscriptions were written before the reconnect was told: the server has them after one round trip.
        try await client.flush()
        let other = try await connect(server)
        try await other.publish(subject: "hw.pos.ann", payload: ByteBuffer(string: "after"))
        let after = try await take(1, from: messages)
        XCTAssertEqual(after.map(\.text), ["after"])
        XCTAssertEqual(after.map(\.onClientLoop), [true])
    }
}
