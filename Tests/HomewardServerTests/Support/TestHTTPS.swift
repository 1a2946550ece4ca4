import HomewardTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A plain HTTPS response: status, headers and body text.
struct TestHTTPResponse: Sendable {
    let status: HTTPResponseStatus
    let headers: HTTPHeaders
    let body: String
}

/// Collects one HTTP response.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<TestHTTPResponse>
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    private var done = false

    init(promise: EventLoopPromise<TestHTTPResponse>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body(var part): body.writeBuffer(&part)
        case .end:
            guard let head, !done else { return }
            done = true
            promise.succeed(TestHTTPResponse(status: head.status, headers: head.headers, body: String(buffer: body)))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard !done else { return context.fireChannelInactive() }
        done = true
        promise.fail(TestFailure("the connection closed before a full HTTP response arrived"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done {
            done = true
            promise.fail(error)
        }
        context.close(promise: nil)
    }
}

/// One HTTPS request to `127.0.0.1:port` (server name `localhost`), trusting only `caPath`; plain HTTP
/// when `caPath` is nil (the metrics listener).
func httpsRequest(port: Int, caPath: String?, method: HTTPMethod = .GET, path: String,
                  headers extra: [(String, String)] = [], timeout: Double = 10) async throws -> TestHTTPResponse {
    let sslContext = try caPath.map { try TestClient.tlsContext(trusting: $0) }
    return try await withTimeout(timeout, "\(method) \(path)") {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let sslContext { try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: "localhost")) }
                    try sync.addHTTPClientHandlers()
                    return channel
                }
            }
        let promise = channel.eventLoop.makePromise(of: TestHTTPResponse.self)
        try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
        }.get()
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "localhost:\(port)")
        headers.add(name: "Connection", value: "close")
        for (name, value) in extra { headers.add(name: name, value: value) }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil))
        return try await promise.futureResult.get()
    }
}
