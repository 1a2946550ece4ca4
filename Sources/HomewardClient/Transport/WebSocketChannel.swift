import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// One TLS WebSocket connection to the relay: connect, write text frames, read what arrives.
///
/// Deliberately thin: it knows frames, not the protocol. `RelayClient` builds everything
/// else on top and opens a new one of these after each loss.
final class WebSocketChannel: Sendable {
    static let subprotocol = "homeward.v1"

    let channel: any Channel
    /// Text messages in arrival order, then exactly one `.closed`.
    let events: AsyncStream<SocketEvent>

    private init(channel: any Channel, events: AsyncStream<SocketEvent>) {
        self.channel = channel
        self.events = events
    }

    private enum Upgrade: Sendable {
        case upgraded(any Channel)
        case refused
    }

    struct Options: Sendable {
        var connectTimeout: TimeAmount = .seconds(10)
        var maxMessageBytes = 1 << 20
        var silenceLimit: TimeAmount = .seconds(75)
    }

    /// Connects, does the TLS handshake and the WebSocket upgrade; throws `RelayClientError.connectFailed`.
    static func connect(to endpoint: RelayEndpoint, tls: NIOSSLContext?, group: any EventLoopGroup,
                        options: Options) async throws(RelayClientError) -> WebSocketChannel {
        let (events, continuation) = AsyncStream<SocketEvent>.makeStream(bufferingPolicy: .unbounded)
        let upgrade: EventLoopFuture<Upgrade>
        do {
            upgrade = try await ClientBootstrap(group: group)
                .connectTimeout(options.connectTimeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connect(host: endpoint.host, port: endpoint.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try Self.configure(channel, endpoint: endpoint, tls: tls, options: options, events: continuation)
                    }
                }
        } catch {
            continuation.finish()
            throw .connectFailed("cannot connect to \(endpoint.host):\(endpoint.port): \(describe(error))")
        }
        do {
            switch try await upgrade.get() {
            case .upgraded(let channel):
                return WebSocketChannel(channel: channel, events: events)
            case .refused:
                continuation.finish()
                throw RelayClientError.connectFailed("\(endpoint.url) did not accept a WebSocket upgrade (wrong path?)")
            }
        } catch let error as RelayClientError {
            throw error
        } catch {
            continuation.finish()
            throw .connectFailed("cannot open \(endpoint.url): \(describe(error))")
        }
    }

    private static func configure(_ channel: any Channel, endpoint: RelayEndpoint, tls: NIOSSLContext?, options: Options,
                                  events: AsyncStream<SocketEvent>.Continuation) throws -> EventLoopFuture<Upgrade> {
        let sync = channel.pipeline.syncOperations
        if let tls {
            try sync.addHandler(NIOSSLClientHandler(context: tls, serverHostname: endpoint.hostIsIPAddress ? nil : endpoint.host))
        }
        let maxMessageBytes = options.maxMessageBytes
        let silenceLimit = options.silenceLimit
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
            maxFrameSize: maxMessageBytes,
            enableAutomaticErrorHandling: true,
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1024,
                                                    maxAccumulatedFrameSize: maxMessageBytes),
                        WebSocketFrameRouter(events: events, silenceLimit: silenceLimit),
                    ])
                    return Upgrade.upgraded(channel)
                }
            })
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: endpoint.hostHeader)
        headers.add(name: "Sec-WebSocket-Protocol", value: subprotocol)
        headers.add(name: "Content-Length", value: "0")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: endpoint.path, headers: headers)
        let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
            upgradeRequestHead: head, upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture { .refused }
            })
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
        // A server may send its first message in the same TCP segment as the 101 response; NIO's default
        // strategy would drop those bytes, so they are handed to the WebSocket decoder instead.
        pipeline.leftOverBytesStrategy = .forwardBytes
        let result = try sync.configureUpgradableHTTPClientPipeline(configuration: pipeline)
        // The TCP connect has its own timeout; this one covers the TLS handshake and the upgrade.
        let timer = channel.eventLoop.scheduleTask(in: options.connectTimeout) { channel.close(promise: nil) }
        result.whenComplete { outcome in
            timer.cancel()
            switch outcome {
            case .success(.upgraded): break
            default: channel.close(promise: nil)
            }
        }
        return result
    }

    /// Writes one text frame; the future-based write keeps frames in call order.
    func send(_ text: ByteBuffer) async throws(RelayClientError) {
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: text)
        do {
            try await channel.writeAndFlush(frame)
        } catch {
            throw .connectionLost(SocketClosure(code: nil, reason: "write failed: \(describe(error))"))
        }
    }

    /// Writes one text frame without waiting for it to be written.
    func sendWithoutWaiting(_ text: ByteBuffer) {
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: text)
        channel.writeAndFlush(frame, promise: nil)
    }

    /// Starts the closing handshake; `events` ends once the connection is down.
    func close(code: UInt16 = 1000) {
        channel.triggerUserOutboundEvent(WebSocketFrameRouter.CloseRequest(code: code), promise: nil)
    }
}

/// BoringSSL's reason code (e.g. CERTIFICATE_VERIFY_FAILED) from its long error text, explained.
private func tlsReason(_ text: String) -> String {
    guard let marker = text.range(of: "OPENSSL_internal:") else { return text }
    let reason = text[marker.upperBound...].prefix { $0 != " " && $0 != "]" && $0 != ")" }
    switch reason {
    case "CERTIFICATE_VERIFY_FAILED":
        return "the relay's certificate is not trusted (CERTIFICATE_VERIFY_FAILED): check --ca"
    case "WRONG_VERSION_NUMBER":
        return "the other end does not speak TLS (WRONG_VERSION_NUMBER): is the URL ws:// instead of wss://?"
    default:
        return String(reason)
    }
}

/// A readable one-line description of a NIO or TLS failure.
func describe(_ error: any Error) -> String {
    switch error {
    case let error as NIOSSLError:
        if case .handshakeFailed(let inner) = error { return "TLS handshake failed: " + tlsReason("\(inner)") }
        return "TLS: \(error)"
    case let error as NIOSSLExtraError: return "TLS: \(error)"
    case ChannelError.connectTimeout: return "timed out"
    case ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed: return "the connection closed"
    case ChannelError.inappropriateOperationForState: return "the connection closed during the handshake"
    case let error as IOError: return error.description
    case let error as NIOConnectionError:
        if let first = error.connectionErrors.first { return "\(first.error)" }
        return "\(error)"
    default: return "\(error)"
    }
}
