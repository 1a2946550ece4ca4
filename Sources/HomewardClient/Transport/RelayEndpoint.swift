import Foundation

/// Where the relay is: parsed from a `wss://host:port/path` URL.
///
/// Parsed by hand rather than with Foundation's URL so that the rules are the same on every
/// platform and the errors can say exactly what is wrong.
public struct RelayEndpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var path: String
    /// `wss` (TLS) or `ws` (plain, only useful behind a TLS-terminating proxy or in tests).
    public var usesTLS: Bool

    public static let defaultURL = "wss://127.0.0.1:8443/v1/ws"

    public init(host: String, port: Int, path: String = "/v1/ws", usesTLS: Bool = true) {
        self.host = host
        self.port = port
        self.path = path
        self.usesTLS = usesTLS
    }

    public struct InvalidURL: Error, Sendable, CustomStringConvertible {
        public let url: String
        public let reason: String
        public var description: String { "invalid relay URL \(url): \(reason)" }
    }

    public init(url: String) throws(InvalidURL) {
        let schemeEnd = url.range(of: "://")
        guard let schemeEnd else { throw InvalidURL(url: url, reason: "expected wss://host:port/path") }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        switch scheme {
        case "wss": usesTLS = true
        case "ws": usesTLS = false
        default: throw InvalidURL(url: url, reason: "scheme must be wss or ws")
        }
        var rest = url[schemeEnd.upperBound...]
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[slash...])
            rest = rest[..<slash]
        } else {
            path = "/v1/ws"
        }
        guard !rest.isEmpty else { throw InvalidURL(url: url, reason: "no host") }
        // An IPv6 literal is written in brackets: wss://[::1]:8443/v1/ws
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw InvalidURL(url: url, reason: "unclosed [ in host") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty {
                throw InvalidURL(url: url, reason: "unexpected text after ]")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty else { throw InvalidURL(url: url, reason: "no host") }
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw InvalidURL(url: url, reason: "port must be 1-65535")
            }
            self.port = port
        } else {
            port = usesTLS ? 443 : 80
        }
    }

    public var url: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "wss" : "ws")://\(shownHost):\(port)\(path)"
    }

    public var description: String { url }

    /// Whether `host` is an IPv4 or IPv6 literal. TLS must not send an IP in SNI; the
    /// certificate is then checked against the address's IP SAN instead.
    public var hostIsIPAddress: Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The `Host` header of the upgrade request.
    var hostHeader: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let defaultPort = usesTLS ? 443 : 80
        return port == defaultPort ? shownHost : "\(shownHost):\(port)"
    }
}
