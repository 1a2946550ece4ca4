import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization
import Foundation

/// Gets what arrives on a `BenchSocket`: the payload of each WebSocket data frame, or the raw
/// decrypted TCP stream. Always called on the socket's event loop.
public protocol ByteReceiver: AnyObject, Sendable {
    func received(_ buffer: ByteBuffer, on socket: BenchSocket)
    func closed()
}

extension ByteReceiver {
    public func closed() {}
}

/// How bytes are framed above TLS.
public enum Framing: Sendable {
    /// MQTT: the TLS stream as it is.
    case raw
    /// A client WebSocket (RFC 6455) on `path`, optionally offering `subprotocol`.
    case webSocket(path: String, subprotocol: String?)
}

/// One lightweight load-generator connection: TLS, then optionally a WebSocket upgrade.
/// Thousands of these share the tool's few event loops; none has a thread of its own.
public final class BenchSocket: Sendable {
    public let channel: any Channel
    public let isWebSocket: Bool
    public var eventLoop: any EventLoop { channel.eventLoop }

    init(channel: any Channel, isWebSocket: Bool) {
        self.channel = channel
        self.isWebSocket = isWebSocket
    }

    private enum Upgrade: Sendable {
        case upgraded(any Channel)
        case refused
    }

    /// Connects from `source` (an address in 127.0.0.0/8) to `host:port`, does the TLS handshake
    /// and, for `.webSocket`, the upgrade.
    public static func connect(group: any EventLoopGroup, tls: NIOSSLContext, host: String, port: Int, source: String?,
                               framing: Framing, receiver: any ByteReceiver,
                               timeout: TimeAmount = .seconds(30)) async throws -> BenchSocket {
        precondition(host.hasPrefix("127."), "the benchmark only connects to loopback")
        var bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
        if let source {
            bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0))
        }
        switch framing {
        case .raw:
            let channel = try await bootstrap.connect(host: host, port: port).get()
            let socket = BenchSocket(channel: channel, isWebSocket: false)
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandlers([
                    try NIOSSLClientHandler(context: tls, serverHostname: nil),
                    RawHandler(receiver: receiver, socket: socket),
                ])
            }.get()
            return socket
        case .webSocket(let path, let subprotocol):
            let upgrade: EventLoopFuture<Upgrade> = try await bootstrap.connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: nil))
                    let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
                        maxFrameSize: 1 << 20,
                        enableAutomaticErrorHandling: true,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                let socket = BenchSocket(channel: channel, isWebSocket: true)
                                try channel.pipeline.syncOperations.addHandler(
                                    WebSocketHandler(receiver: receiver, socket: socket))
                                return Upgrade.upgraded(channel)
                            }
                        })
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "\(host):\(port)")
                    if let subprotocol { headers.add(name: "Sec-WebSocket-Protocol", value: subprotocol) }
                    headers.add(name: "Content-Length", value: "0")
                    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
                        upgradeRequestHead: head, upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in channel.eventLoop.makeCompletedFuture { .refused } })
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    // nats-server sends INFO right behind its 101 response: keep those bytes for the WebSocket decoder.
                    pipeline.leftOverBytesStrategy = .forwardBytes
                    let result = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: pipeline)
                    let timer = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                    result.whenComplete { _ in timer.cancel() }
                    return result
                }
            }
            switch try await upgrade.get() {
            case .upgraded(let channel):
                return BenchSocket(channel: channel, isWebSocket: true)
            case .refused:
                throw BenchError.failed("\(host):\(port)\(path) refused the WebSocket upgrade")
            }
        }
    }

    /// Writes and flushes one message (one WebSocket text frame, or raw bytes). Any thread.
    public func send(_ buffer: ByteBuffer) {
        if isWebSocket {
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer), promise: nil)
        } else {
            channel.writeAndFlush(buffer, promise: nil)
        }
    }

    public func close() {
        channel.close(promise: nil)
    }

    /// Reports the first few connection errors on stderr.
    static let errorsReported = Mutex(0)
    static func report(_ error: any Error) {
        let count = errorsReported.withLock { value in
            value += 1
            return value
        }
        if count <= 5 { FileHandle.standardError.write(Data("connection error: \(error)\n".utf8)) }
    }
}

/// Like every NIO handler, not `Sendable`: it lives on its channel's event loop (see `HTTPServerPipelineHandler`).
final class RawHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let receiver: any ByteReceiver
    let socket: BenchSocket

    init(receiver: any ByteReceiver, socket: BenchSocket) {
        self.receiver = receiver
        self.socket = socket
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        receiver.received(unwrapInboundIn(data), on: socket)
    }

    func channelInactive(context: ChannelHandlerContext) {
        receiver.closed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        BenchSocket.report(error)
        context.close(promise: nil)
    }
}

/// Not `Sendable`, as `RawHandler`.
final class WebSocketHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    let receiver: any ByteReceiver
    let socket: BenchSocket

    init(receiver: any ByteReceiver, socket: BenchSocket) {
        self.receiver = receiver
        self.socket = socket
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation:
            receiver.received(frame.unmaskedData, on: socket)
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            context.close(promise: nil)
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        receiver.closed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        BenchSocket.report(error)
        context.close(promise: nil)
    }
}

public enum BenchError: Error, CustomStringConvertible {
    case failed(String)
    public var description: String {
        switch self { case .failed(let text): return text }
    }
}
