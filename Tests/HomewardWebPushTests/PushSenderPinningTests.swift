import Foundation
import HomewardWebPush
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import XCTest

/// `PushRequest.connectTo`: the sender connects to the vetted address, not to whatever the host name
/// resolves to, and still names the host in `Host`. The host here (`push.invalid`, a name that never
/// resolves) is not looked up at all: only the pinned address can reach the test's server on 127.0.0.1.
final class PushSenderPinningTests: XCTestCase {
    /// Answers every request 201 and keeps its `Host` header.
    private final class Recorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let hosts = Mutex<[String]>([])

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                hosts.withLock { $0.append(head.headers.first(name: "Host") ?? "") }
            case .body:
                break
            case .end:
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .created, headers: headers))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    func testAPinnedRequestGoesToTheVettedAddressAndNamesItsHost() async throws {
        let recorder = Recorder()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(recorder) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try XCTUnwrap(server.localAddress?.port)
        let sender = PushSender(timeout: .seconds(5))
        let url = try XCTUnwrap(URL(string: "http://push.invalid:\(port)/s/1"))

        let pinned = await sender.send(PushRequest(url: url, headers: [], body: [1, 2, 3], connectTo: "127.0.0.1"))
        XCTAssertEqual(pinned, .delivered(status: 201))
        XCTAssertEqual(recorder.hosts.withLock { $0 }, ["push.invalid:\(port)"])


        try await sender.shutdown()
        try await server.close()
    }
}
