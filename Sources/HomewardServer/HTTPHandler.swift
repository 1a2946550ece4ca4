import NIOCore
import NIOHTTP1

/// Plain HTTP on the relay's port: health, metrics, and a helpful answer to everything else.
final class HTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable () -> [UInt8]
    /// Served at `GET /v1/push/key` (protocol 1.1, push) for browsers to subscribe with.
    var vapidPublicKey = ""
    private var head: HTTPRequestHead?
    /// Set once the connection is being closed: later (pipelined) requests are not served.
    private var closing = false

    init(metrics: @escaping @Sendable () -> [UInt8]) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
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

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch (head.method, path) {
        case (.GET, "/healthz"), (.HEAD, "/healthz"):
            write(.ok, "ok\n", contentType: "text/plain; charset=utf-8", head: head, context: context)
        case (.GET, "/metrics"), (.HEAD, "/metrics"):
            write(.ok, metrics(), contentType: "text/plain; version=0.0.4; charset=utf-8", head: head, context: context)
        case (.GET, "/v1/push/key"), (.HEAD, "/v1/push/key"):
            write(.ok, "{\"vapidPublicKey\":\"\(vapidPublicKey)\"}\n", contentType: "application/json", head: head, context: context)
        case (_, "/v1/ws"):
            var extra = HTTPHeaders()
            extra.add(name: "Upgrade", value: "websocket")
            extra.add(name: "Connection", value: "Upgrade")
            extra.add(name: "Sec-WebSocket-Version", value: "13")
            write(.upgradeRequired, "this endpoint speaks WebSocket only: send an upgrade request\n",
                  contentType: "text/plain; charset=utf-8", head: head, extra: extra, context: context)
        default:
            write(.notFound, "not found\n", contentType: "text/plain; charset=utf-8", head: head, context: context)
        }
    }

    private func write(_ status: HTTPResponseStatus, _ body: String, contentType: String, head: HTTPRequestHead,
                       extra: HTTPHeaders = [:], context: ChannelHandlerContext) {
        write(status, Array(body.utf8), contentType: contentType, head: head, extra: extra, context: context)
    }

    private func write(_ status: HTTPResponseStatus, _ body: [UInt8], contentType: String, head: HTTPRequestHead,
                       extra: HTTPHeaders = [:], context: ChannelHandlerContext) {
        var headers = extra
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.count))
        // A client that pipelines requests without reading the answers would make the relay buffer
        // every answer (kilobytes per 35-byte request) and every parsed request until the handshake
        // timeout. Once the socket stops taking data, close the connection and serve nothing more.
        guard context.channel.isWritable else {
            closing = true
            context.close(promise: nil)
            return
        }
        let keepAlive = head.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        if extra.contains(name: "Connection") { headers.remove(name: "Connection"); headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }
}
