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
        let resolve = self.resolve
        let addresses: [IPAddressBytes]
        if let literal = IPAddressBytes(literal: host) {
            addresses = [literal]
        } else {
            addresses = await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: resolve(host)) }
            }
        }
        guard !addresses.isEmpty else { throw .invalid("endpoint host \(host) does not resolve") }
        if let bad = addresses.first(where: { !$0.isPublic }) {
            throw .invalid("endpoint host \(host) is a loopback, private or link-local address (\(bad)); push services are public")
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

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address, and whether it is a public unicast one.
struct IPAddressBytes: Sendable, Equatable, CustomStringConvertible {
    let bytes: [UInt8]

    init(bytes: [UInt8]) {
        precondition(bytes.count == 4 || bytes.count == 16, "an IP address is 4 or 16 bytes")
        self.bytes = bytes
    }

    /// Parses a literal IPv4 or IPv6 address (no brackets), or nil for a host name.
    init?(literal: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: v4) { Array($0) })
        } else if inet_pton(AF_INET6, literal, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: v6) { Array($0) })
        } else {
            return nil
        }
    }

    var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }

    /// False for loopback, private, shared (CGNAT), link-local, unspecified, multicast, broadcast and
    /// documentation-only ranges; an IPv4-mapped IPv6 address is judged as its IPv4 address.
    var isPublic: Bool {
        if bytes.count == 16 {
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                return IPAddressBytes(bytes: Array(bytes[12..<16])).isPublic
            }
            if bytes.allSatisfy({ $0 == 0 }) { return false }  // ::
            if bytes[0..<15].allSatisfy({ $0 == 0 }), bytes[15] == 1 { return false }  // ::1
            if bytes[0] & 0xfe == 0xfc { return false }  // fc00::/7 unique local
            if bytes[0] == 0xfe, bytes[1] & 0xc0 == 0x80 { return false }  // fe80::/10 link-local
            if bytes[0] == 0xff { return false }  // multicast
            if bytes[0] == 0x20, bytes[1] == 0x01, bytes[2] == 0x0d, bytes[3] == 0xb8 { return false }  // 2001:db8::/32
            return true
        }
        let (a, b) = (bytes[0], bytes[1])
        switch a {
        case 0, 10, 127: return false
        case 100 where b & 0xc0 == 64: return false  // 100.64.0.0/10
        case 169 where b == 254: return false
        case 172 where b & 0xf0 == 16: return false
        case 192 where b == 168: return false
        case 192 where b == 0 && bytes[2] == 2, 198 where b == 51 && bytes[2] == 100, 203 where b == 0 && bytes[2] == 113:
            return false  // documentation ranges
        case 198 where b & 0xfe == 18: return false  // 198.18.0.0/15 benchmarking
        case 224...255: return false  // multicast, reserved, broadcast
        default: return true
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
