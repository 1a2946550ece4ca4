import Dispatch
import Foundation
import HomewardCore
import HomewardWebPush

/// Checks a `push.subscribe` before it is stored: an `https:` endpoint (RFC 8030 requires it) whose host
/// is a public address, so that no user can make the relay POST to the relay's own machine or network
/// (server-side request forgery); and keys a message can be encrypted for. `--push-allow-http` and
/// `--push-allow-private` lift the first two for tests with a push service on loopback.
struct PushEndpointPolicy: Sendable {
    let allowHTTP: Bool
    let allowPrivate: Bool
    /// Resolves a host name to its addresses; blocking, so it is called off every event loop and the
    /// relay's queue. Tests replace it.
    var resolve: @Sendable (String) -> [IPAddressBytes] = PushEndpointPolicy.systemResolve

    func check(endpoint: String, p256dh: String, auth: String) async throws(RelayError) {
        do {
            _ = try WebPushSubscriptionKeys(p256dh: p256dh, auth: auth)
        } catch {
            throw .invalid("keys: \(error.description)")
        }
        let host = try checkShape(endpoint)
        guard !allowPrivate else { return }
        let addresses = await addresses(of: host)
        guard !addresses.isEmpty else { throw .invalid("endpoint host \(host) does not resolve") }
        if let bad = addresses.first(where: { !$0.isPublic }), let block = bad.specialPurpose {
            throw .invalid("endpoint host \(host) is a special-purpose address (\(bad): \(block)); push services are public")
        }
    }

    /// Where a push to `url` may go, decided right before each send (a host's DNS may have changed since
    /// `push.subscribe` checked it: rebinding). A name is resolved again; when every address is public
    /// the push connects to the first of them, the address vetted here. A literal address is checked
    /// and connected to as written.
    enum SendTarget: Sendable, Equatable {
        /// Connect to this address (nil: resolve as usual; only with `--push-allow-private`).
        case connect(String?)
        /// The host resolves to nothing now: try again later.
        case unresolved
        /// The host is or resolves to a special-purpose address: never send there.
        case refused(String)
    }

    func target(of url: URL) async -> SendTarget {
        guard !allowPrivate else { return .connect(nil) }
        guard var host = url.host, !host.isEmpty else { return .refused("no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let literal = IPAddressBytes(literal: host) != nil
        let addresses = await addresses(of: host)
        guard let first = addresses.first else { return .unresolved }
        if let bad = addresses.first(where: { !$0.isPublic }), let block = bad.specialPurpose {
            return .refused("\(host) is or resolves to a special-purpose address (\(bad): \(block))")
        }
        return .connect(literal ? nil : first.description)
    }

    /// A literal as itself; a name resolved by the system resolver, off the caller's thread.
    private func addresses(of host: String) async -> [IPAddressBytes] {
        if let literal = IPAddressBytes(literal: host) { return [literal] }
        let resolve = self.resolve
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: resolve(host)) }
        }
    }

    /// The URL's shape: scheme, host, no credentials, no control characters. Returns the host.
    func checkShape(_ endpoint: String) throws(RelayError) -> String {
        guard !endpoint.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }),
              let url = URL(string: endpoint), let scheme = url.scheme?.lowercased()
        else { throw .invalid("endpoint must be an absolute URL") }
        guard scheme == "https" || (scheme == "http" && allowHTTP) else {
            throw .invalid(allowHTTP ? "endpoint must be an http or https URL" : "endpoint must be an https URL")
        }
        guard url.user == nil, url.password == nil else { throw .invalid("endpoint must not carry credentials") }
        guard var host = url.host, !host.isEmpty else { throw .invalid("endpoint has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host
    }

    static func systemResolve(_ host: String) -> [IPAddressBytes] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var result: [IPAddressBytes] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            if let address = info.pointee.ai_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        result.append(IPAddressBytes(bytes: withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) }))
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        result.append(IPAddressBytes(bytes: withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) }))
                    }
                default:
                    break
                }
            }
            cursor = info.pointee.ai_next
        }
        return result
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
