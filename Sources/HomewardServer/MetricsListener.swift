import NIOCore
import NIOHTTP1
import NIOPosix

/// A host and port to listen on, written `HOST:PORT` (`[::1]:9464` for IPv6).
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init?(parsing text: String) {
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let number = Int(port), (0...65535).contains(number) else { return nil }
        self.init(host: String(host), port: number)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Who may read the full metrics. They show when alarms are raised and pending, how many are online:
/// activity of the people using the relay, which is theirs, not the public's.
struct MetricsAccess: Sendable {
    /// `--metrics-token`; nil when none is set.
    let token: String?

    enum Verdict: Equatable {
        /// The request carries the token.
        case granted
        /// It carries an `Authorization` header that is not the token (or there is no token to match).
        case refused
        /// It carries none.
        case anonymous
    }

    func verdict(_ headers: HTTPHeaders) -> Verdict {
        guard let authorization = headers.first(name: "Authorization") else { return .anonymous }
        let scheme = "bearer "
        guard let token, authorization.lowercased().hasPrefix(scheme),
              Self.constantTimeEquals(Array(authorization.utf8.dropFirst(scheme.utf8.count)), Array(token.utf8)) else { return .refused }
        return .granted
    }

    /// Compares without stopping at the first difference, so timing tells nothing of the token's bytes.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// What the main port's `/metrics` shows to anyone without the token: valid Prometheus text that
    /// says the relay is up and where the metrics are, and nothing about its users.
    static let publicExposition = Array("""
        # The relay's metrics are served on its metrics listener (--metrics-listen, loopback by default),
        # or here to requests with Authorization: Bearer and the relay's --metrics-token.
        # HELP homeward_up Whether the relay is serving.
        # TYPE homeward_up gauge
        homeward_up 1

        """.utf8)

    static func unauthorized() -> HTTPAnswer {
        var answer = HTTPAnswer(.unauthorized, "a valid bearer token is required\n")
        answer.headers.add(name: "WWW-Authenticate", value: "Bearer realm=\"metrics\"")
        return answer
    }
}

/// The metrics listener (`--metrics-listen`): plain HTTP serving `GET /metrics` (the full exposition,
/// with the bearer token when one is set) and `GET /healthz`, nothing else. Meant for loopback or a
/// private monitoring network: it has no TLS and no limits beyond NIO's HTTP parser.
enum MetricsListener {
    static func bind(_ address: ListenAddress, group: any EventLoopGroup, access: MetricsAccess,
                     exposition: @escaping @Sendable () -> [UInt8]) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(access: access, exposition: exposition))
                }
            }
            .bind(host: address.host, port: address.port)
            .get()
    }
}

/// One connection of the metrics listener.
final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let access: MetricsAccess
    private let exposition: @Sendable () -> [UInt8]
    private var head: HTTPRequestHead?

    init(access: MetricsAccess, exposition: @escaping @Sendable () -> [UInt8]) {
        self.access = access
        self.exposition = exposition
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(answer(to: head), head: head, context: context)
        }
    }

    func answer(to head: HTTPRequestHead) -> HTTPAnswer {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        guard path == "/metrics" || path == "/healthz" else { return HTTPAnswer(.notFound, "not found\n") }
        guard head.method == .GET || head.method == .HEAD else {
            var answer = HTTPAnswer(.methodNotAllowed, "only GET and HEAD\n")
            answer.headers.add(name: "Allow", value: "GET, HEAD")
            return answer
        }
        if path == "/healthz" { return HTTPAnswer(.ok, "ok\n") }
        switch access.verdict(head.headers) {
        case .granted: break
        case .anonymous where access.token == nil: break
        case .anonymous, .refused: return MetricsAccess.unauthorized()
        }
        var answer = HTTPAnswer(.ok, "", contentType: "text/plain; version=0.0.4; charset=utf-8")
        answer.body = ByteBuffer(bytes: exposition())
        return answer
    }

    private func respond(_ answer: HTTPAnswer, head: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = answer.headers
        headers.add(name: "Content-Length", value: String(answer.body.readableBytes))
        headers.add(name: "Connection", value: head.isKeepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: answer.status, headers: headers))), promise: nil)
        if head.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil) }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !head.isKeepAlive {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }
}
