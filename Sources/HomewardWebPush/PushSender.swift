import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// What sends a `PushRequest` and says what the answer means; `PushSender` over HTTP, or a test double.
public protocol PushTransport: Sendable {
    func send(_ request: PushRequest) async -> DeliveryOutcome
    func shutdown() async throws
}

/// Sends `PushRequest`s with async-http-client and classifies the answers. Redirects are not
/// followed: a push service answers directly, and a redirect could point the relay at an address the
/// endpoint check refused.
public final class PushSender: PushTransport {
    private let client: HTTPClient
    private let timeout: TimeAmount

    public init(timeout: TimeAmount = .seconds(10)) {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: timeout, read: timeout)
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.timeout = timeout
    }

    /// Sends once. A transport failure (refused, reset, timed out) is a `retry` with no status.
    public func send(_ request: PushRequest) async -> DeliveryOutcome {
        var http = HTTPClientRequest(url: request.url.absoluteString)
        http.method = .POST
        for header in request.headers { http.headers.add(name: header.name, value: header.value) }
        http.headers.replaceOrAdd(name: "Content-Length", value: String(request.body.count))
        http.body = .bytes(ByteBuffer(bytes: request.body))
        do {
            let response = try await client.execute(http, timeout: timeout)
            // The body is not needed; read a little of it so the connection can be reused.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            return DeliveryOutcome.classify(status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"))
        } catch {
            return .retry(status: nil, after: nil)
        }
    }

    public func shutdown() async throws {
        try await client.shutdown()
    }
}
