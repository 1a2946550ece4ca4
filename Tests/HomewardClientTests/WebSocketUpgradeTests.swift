import Foundation
import Crypto
import NIOCore
import NIOPosix
import XCTest
@testable import HomewardClient

/// The client's WebSocket upgrade against a server that is not our relay.
final class WebSocketUpgradeTests: XCTestCase {
    /// Servers may send their first message in the same TCP segment as the 101 response
    /// (nats-server does). Those bytes belong to the WebSocket, not to the HTTP exchange.
    func testFramesArrivingWithThe101ResponseAreDelivered() async throws {
        let server = try await EagerWebSocketServer.start()
        defer { server.stop() }
        let socket = try await WebSocketChannel.connect(
            to: RelayEndpoint(host: "127.0.0.1", port: server.port, usesTLS: false),
            tls: nil, group: MultiThreadedEventLoopGroup.singleton, options: .init(silenceLimit: .seconds(5)))
        var events = socket.events.makeAsyncIterator()
        guard case .text(let first)? = await events.next() else {
            return XCTFail("the frame sent right behind the 101 response was lost")
        }
        XCTAssertEqual(String(buffer: first), EagerWebSocketServer.greeting)
        guard case .closed(let closure)? = await events.next() else { return XCTFail("no close after the greeting") }
        XCTAssertEqual(closure.code, 1000, "the close frame that followed the greeting was lost")
    }
}

/// A plain-TCP server on 127.0.0.1 that answers any WebSocket upgrade with one write holding the
/// 101 response, a text frame and a close frame.
private final class EagerWebSocketServer: Sendable {
    static let greeting = #"{"type":"hello-from-server"}"#
    let channel: any Channel
    var port: Int { channel.localAddress!.port! }

    private init(channel: any Channel) { self.channel = channel }

    static func start() async throws -> EagerWebSocketServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Responder()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return EagerWebSocketServer(channel: channel)
    }

    func stop() { channel.close(promise: nil) }

    private final class Responder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var request = ""

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            request += String(buffer: unwrapInboundIn(data))
            guard request.contains("\r\n\r\n") else { return }
            let key = request.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
                .base64EncodedString()
            var out = context.channel.allocator.buffer(capacity: 256)
            out.writeString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Protocol: \(WebSocketChannel.subprotocol)\r\n\r\n")
            out.writeBytes([0x81, UInt8(EagerWebSocketServer.greeting.utf8.count)])
            out.writeString(EagerWebSocketServer.greeting)
            out.writeBytes([0x88, 0x02, 0x03, 0xE8])
            context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            request = ""
        }
    }
}
