/// One `nats://[user:pass@]host[:port]` URL (port 4222 when left out).
public struct NATSServerAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String?
    public var password: String?

    public init(host: String, port: Int = 4222, user: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
    }

    public init(url: String) throws(NATSError) {
        guard url.hasPrefix("nats://") else { throw .invalidURL(url) }
        var rest = Substring(url.dropFirst("nats://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = credentials.firstIndex(of: ":") else { throw .invalidURL(url) }
            user = String(credentials[..<colon])
            password = String(credentials[credentials.index(after: colon)...])
        }
        let hostPart: Substring
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else { throw .invalidURL(url) }
            self.port = port
            hostPart = rest[..<colon]
        } else {
            port = 4222
            hostPart = rest
        }
        host = String(hostPart.trimmingPrefix("[").dropLast(hostPart.hasSuffix("]") ? 1 : 0))
        guard !host.isEmpty, !host.contains("/"), !host.contains(where: \.isWhitespace) else { throw .invalidURL(url) }
    }

    /// The URL without the password, for logs and events.
    public var description: String { "nats://\(user.map { "\($0)@" } ?? "")\(host):\(port)" }
}
