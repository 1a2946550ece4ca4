import HomewardNATS
import HomewardTestSupport
import NIOCore
import NIOPosix
import XCTest

/// The client against servers that are not (well-behaved) nats-servers, and against one that wants a password.
final class NATSClientBadServerTests: XCTestCase {
    /// A loopback TCP server that sends `greeting` to each connection and otherwise stays silent.
    private func startFakeServer(greeting: String) async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Greeter(greeting: greeting)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        addTeardownBlock { try? await channel.close() }
        return channel.localAddress!.port!
    }

    private func configuration() -> NATSClientConfiguration {
        var configuration = NATSClientConfiguration()
        configuration.connectTimeout = .milliseconds(300)
        return configuration
    }

    private func connectError(_ urls: [String]) async -> NATSError? {
        do {
            let client = try await NATSClient.connect(urls: urls, configuration: configuration())
            await client.close()
            return nil
        } catch {
            return error as? NATSError
        }
    }

    func testAServerThatNeverSendsINFOTimesOutTheHandshake() async throws {
        let port = try await startFakeServer(greeting: "")
        let started = ContinuousClock.now
        let error = await connectError(["nats://127.0.0.1:\(port)"])
        XCTAssertEqual(error, .connectFailed("handshake timed out"))
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(3))
    }

    func testAServerSpeakingAnotherProtocolFailsWithAProtocolError() async throws {
        let port = try await startFakeServer(greeting: "HTTP/1.1 400 Bad Request\r\n\r\n")
        guard case .connectFailed(let reason) = await connectError(["nats://127.0.0.1:\(port)"]) else {
            return XCTFail("connected to an HTTP server")
        }
        XCTAssertTrue(reason.contains("NATS protocol error: unknown operation 'HTTP/1.1'"), reason)
    }

    func testABadServerIsSkippedForTheNextURL() async throws {
        let bad = try await startFakeServer(greeting: "-ERR 'not today'\r\n")
        let server = try await NATSServerProcess.start()
        addTeardownBlock { server.stop() }
        let client = try await NATSClient.connect(urls: ["nats://127.0.0.1:\(bad)", server.url], configuration: configuration())
        let connected = await client.isConnected
        XCTAssertTrue(connected)
        await client.close()
    }

    func testCredentialsFromTheURLAreSentAndWrongOnesAreRefused() async throws {
        let server = try await NATSServerProcess.start(configuration: "authorization { user: relay, password: s3cret }\n")
        addTeardownBlock { server.stop() }
        let wrong = await connectError(["nats://relay:guess@127.0.0.1:\(server.port)"])
        XCTAssertEqual(wrong, .connectFailed("server error: Authorization Violation"))
        let none = await connectError([server.url])
        XCTAssertEqual(none, .connectFailed("server error: Authorization Violation"))
        let client = try await NATSClient.connect(urls: ["nats://relay:s3cret@127.0.0.1:\(server.port)"], configuration: configuration())
        let subscription = try await client.subscribe(subject: "private")
        try await client.publish(subject: "private", payload: ByteBuffer(string: "in"))
        let text = try await withTimeout(10, "the message") {
            for await message in subscription { return message.payloadString }
            return ""
        }
        XCTAssertEqual(text, "in")
        await client.close()
    }
}

/// Says its piece when a client connects, then ignores everything.
private final class Greeter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let greeting: String

    init(greeting: String) { self.greeting = greeting }

    func channelActive(context: ChannelHandlerContext) {
        if !greeting.isEmpty { context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: greeting)), promise: nil) }
        context.fireChannelActive()
    }
}
