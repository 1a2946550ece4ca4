import Foundation

/// Where the PostgreSQL store is: parsed from `postgres://USER[:PASS]@HOST[:PORT]/DB[?sslmode=MODE]`.
///
/// Only what the relay uses is accepted; anything else in the URL is an error at start-up rather than
/// a setting that is silently ignored.
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    /// How the connection uses TLS, as libpq's `sslmode` names it.
    public enum TLSMode: String, Sendable, CaseIterable {
        /// Plain TCP (a database on the same machine or a private network).
        case disable
        /// TLS when the server offers it (the default, as in libpq).
        case prefer
        /// TLS or no connection; the server's certificate is verified against the system's trust roots.
        case require
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode

    public init(host: String, port: Int = 5432, username: String, password: String? = nil, database: String,
                tls: TLSMode = .prefer) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// Parses `url`, or throws an error that says what is wrong with it.
    public init(url: String) throws(PostgresLocationError) {
        guard let parts = URLComponents(string: url) else { throw .init(url, "it is not a URL") }
        guard let scheme = parts.scheme, ["postgres", "postgresql"].contains(scheme.lowercased()) else {
            throw .init(url, "it must start with postgres://")
        }
        guard let host = parts.host, !host.isEmpty else { throw .init(url, "it names no host") }
        guard let username = parts.user, !username.isEmpty else {
            throw .init(url, "it names no user (postgres://USER[:PASS]@HOST:PORT/DB)")
        }
        let port = parts.port ?? 5432
        guard (1...65535).contains(port) else { throw .init(url, "the port must be 1-65535") }
        let path = parts.path.hasPrefix("/") ? String(parts.path.dropFirst()) : parts.path
        guard !path.isEmpty, !path.contains("/") else { throw .init(url, "it names no database (…/DB at the end)") }
        guard parts.fragment == nil else { throw .init(url, "it has a #fragment") }
        var tls = TLSMode.prefer
        for item in parts.queryItems ?? [] {
            guard item.name == "sslmode" else { throw .init(url, "unknown parameter '\(item.name)' (only sslmode is understood)") }
            guard let mode = item.value.flatMap(TLSMode.init(rawValue:)) else {
                throw .init(url, "sslmode must be \(TLSMode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            tls = mode
        }
        // URLComponents keeps percent escapes in user and password (a '@' or ':' in a password is written %40, %3A).
        guard let user = parts.percentEncodedUser?.removingPercentEncoding,
              let database = path.removingPercentEncoding else { throw .init(url, "it has a bad %-escape") }
        let password = try parts.percentEncodedPassword.map { encoded throws(PostgresLocationError) in
            guard let decoded = encoded.removingPercentEncoding else { throw .init(url, "it has a bad %-escape") }
            return decoded
        }
        self.init(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }

    /// The URL without its password: safe to log and to show in errors.
    public var description: String {
        "postgres://\(username)\(password == nil ? "" : ":***")@\(host):\(port)/\(database)"
            + (tls == .prefer ? "" : "?sslmode=\(tls.rawValue)")
    }
}

/// A `--store` URL that cannot be used, and why.
public struct PostgresLocationError: Error, CustomStringConvertible, Equatable {
    public let reason: String
    /// The URL with any password masked: errors end up in logs.
    public let url: String

    init(_ url: String, _ reason: String) {
        self.url = Self.masked(url)
        self.reason = reason
    }

    public var description: String { "bad PostgreSQL URL '\(url)': \(reason)" }

    /// `url` with what stands between the first ':' after '//' and the last '@' replaced by ***.
    public static func masked(_ url: String) -> String {
        guard let start = url.range(of: "//"), let at = url.range(of: "@", options: .backwards),
              start.upperBound <= at.lowerBound,
              let colon = url[start.upperBound..<at.lowerBound].firstIndex(of: ":") else { return url }
        return url[..<url.index(after: colon)] + "***" + url[at.lowerBound...]
    }
}
