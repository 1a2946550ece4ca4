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
///
/// A request with `connectTo` goes through a client of its own whose DNS override maps the URL's host
/// to that address, so the connection is made to the address the caller vetted, not to whatever the
/// host resolves to a moment later; the certificate is still checked against the host. Such a client
/// keeps no connection for the next request.
public final class PushSender: PushTransport {
    private let client: HTTPClient
    private let timeout: TimeAmount

    public init(timeout: TimeAmount = .seconds(10)) {
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.configuration(timeout: timeout))
        self.timeout = timeout
    }

    private static func configuration(timeout: TimeAmount, host: String? = nil, address: String? = nil) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: timeout, read: timeout)
        if let host, let address { configuration.dnsOverride = [host: address] }
        return configuration
    }

    /// Sends once. A transport failure (refused, reset, timed out) is a `retry` with no status.
    public func send(_ request: PushRequest) async -> DeliveryOutcome {
        guard let address = request.connectTo, let host = request.url.host else { return await send(request, with: client) }
        let pinned = HTTPClient(eventLoopGroupProvider: .singleton,
                                configuration: Self.configuration(timeout: timeout, host: Self.bare(host), address: address))
        let outcome = await send(request, with: pinned)
        try? await pinned.shutdown()
        return outcome
    }

    /// A host as async-http-client compares it: IPv6 literals without their brackets.
    private static func bare(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    private func send(_ request: PushRequest, with client: HTTPClient) async -> DeliveryOutcome {
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
