import HomewardProtocol
import NIOCore
import NIOHTTP1

/// Plain HTTP on the relay's port: health, metrics (in full only with the bearer token, see
/// `MetricsAccess`), the web app (`WebSite`), and a helpful answer to everything else. Every answer
/// carries the `SecurityHeaders`. A WebSocket upgrade from a page whose origin is not allowed
/// (`OriginPolicy`) is not performed and ends here, with 403.
final class HTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable () -> [UInt8]
    private let site: WebSite
    private let security: SecurityHeaders
    /// Served at `GET /v1/push/key` (protocol 1.1, push) for browsers to subscribe with.
    private let vapidPublicKey: String
    private let metricsAccess: MetricsAccess
    private let origins: OriginPolicy
    private var head: HTTPRequestHead?
    /// Set once the connection is being closed: later (pipelined) requests are not served.
    private var closing = false

    static let pushKeyPath = "/v1/push/key"

    init(metrics: @escaping @Sendable () -> [UInt8], site: WebSite = WebSite(assets: WebAssets(), tiles: nil),
         vapidPublicKey: String = "", metricsAccess: MetricsAccess = MetricsAccess(token: nil),
         origins: OriginPolicy = OriginPolicy()) {
        self.metrics = metrics
        self.site = site
        self.security = SecurityHeaders(tileSource: site.tiles?.cspSource)
        self.vapidPublicKey = vapidPublicKey
        self.metricsAccess = metricsAccess
        self.origins = origins
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            write(answer(to: head), head: head, context: context)
        }
    }

    /// A request the HTTP parser refused (oversized headers, garbage) was answered with 400 by NIO's
    /// error handler; close now rather than hold the connection until the handshake timeout.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError {
            context.close(promise: nil)
        } else {
            context.fireErrorCaught(error)
        }
    }

    func answer(to head: HTTPRequestHead) -> HTTPAnswer {
        let path: String
        switch RequestPath(uri: head.uri) {
        case .tooLong: return HTTPAnswer(.uriTooLong, "request target too long\n")
        case .invalid: return HTTPAnswer(.badRequest, "bad request path\n")
        case .path(let decoded): path = decoded
        }
        if path == PipelineFactory.path {
            guard origins.admits(head.headers["Origin"]) else {
                return HTTPAnswer(.forbidden, "this page's origin may not open connections to this relay\n")
            }
            var answer = HTTPAnswer(.upgradeRequired, "this endpoint speaks WebSocket only: send an upgrade request\n")
            answer.headers.add(name: "Upgrade", value: "websocket")
            answer.headers.add(name: "Sec-WebSocket-Version", value: "13")
            return answer
        }
        let known = path == "/healthz" || path == "/metrics" || path == Self.pushKeyPath || site.serves(path)
        guard head.method == .GET || head.method == .HEAD else {
            guard known else { return HTTPAnswer(.notFound, "not found\n") }
            var answer = HTTPAnswer(.methodNotAllowed, "only GET and HEAD\n")
            answer.headers.add(name: "Allow", value: "GET, HEAD")
            return answer
        }
        switch path {
        case "/healthz":
            return HTTPAnswer(.ok, "ok\n")
        case "/metrics":
            let exposition: [UInt8]
            switch metricsAccess.verdict(head.headers) {
            case .granted: exposition = metrics()
            case .anonymous: exposition = MetricsAccess.publicExposition
            case .refused: return MetricsAccess.unauthorized()
            }
            var answer = HTTPAnswer(.ok, "", contentType: "text/plain; version=0.0.4; charset=utf-8")
            answer.body = ByteBuffer(bytes: exposition)
            return answer
        case Self.pushKeyPath:
            // Encoded when asked for, not per connection: most connections upgrade without asking.
            var answer = HTTPAnswer(.ok, "", contentType: "application/json")
            JSONWriter.write(["vapidPublicKey": .string(vapidPublicKey)], into: &answer.body)
            answer.body.writeString("\n")
            return answer
        default:
            return site.answer(path: path, headers: head.headers)
        }
    }

    private func write(_ answer: HTTPAnswer, head: HTTPRequestHead, context: ChannelHandlerContext) {
        // A client that pipelines requests without reading the answers would make the relay buffer
        // every answer (kilobytes per 35-byte request) and every parsed request until the handshake
        // timeout. Once the socket stops taking data, close the connection and serve nothing more.
        guard context.channel.isWritable else {
            closing = true
            context.close(promise: nil)
            return
        }
        var headers = answer.headers
        security.add(to: &headers, host: head.headers.first(name: "Host"))
        if answer.status != .notModified {
            headers.add(name: "Content-Length", value: String(answer.body.readableBytes))
        }
        let keepAlive = head.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: answer.status, headers: headers))), promise: nil)
        if head.method != .HEAD, answer.status != .notModified {
            context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }
}
