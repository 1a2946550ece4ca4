import Foundation
import Synchronization

/// Which web pages may open a WebSocket to the relay. A browser names the page's origin in `Origin` on
/// every WebSocket upgrade, and a page on any site may open one to any host: without this check, any
/// page a user visits could use up that user's address budgets (unauthenticated connections, failed
/// sign-ins) or try tokens from their browser. Clients that are not browsers (the CLI, apps) send no
/// `Origin` and are not affected; a browser cannot leave it out.
///
/// The allowed origins are the operator's (`--allowed-origins`), by default the relay's own public URL's
/// (see `RelayConfiguration.webSocketOrigins(port:)`); set once the listener's port is known.
final class OriginPolicy: Sendable {
    private let allowed: Mutex<Set<String>>

    init(_ origins: [String] = []) {
        allowed = Mutex(Set(origins.compactMap(WebOrigin.normalize)))
    }

    func allow(_ origins: [String]) {
        let normalized = Set(origins.compactMap(WebOrigin.normalize))
        allowed.withLock { $0 = normalized }
    }

    /// Whether a request with these `Origin` header values may upgrade: none (not a browser), or each one listed.
    func admits(_ origins: [String]) -> Bool {
        guard !origins.isEmpty else { return true }
        let normalized = origins.map(WebOrigin.normalize)
        return allowed.withLock { allowed in
            normalized.allSatisfy { origin in origin.map { allowed.contains($0) } ?? false }
        }
    }

    var origins: Set<String> { allowed.withLock { $0 } }
}

/// A web origin (RFC 6454) as `scheme://host[:port]`, lowercased, the scheme's default port left out.
public enum WebOrigin {
    /// The origin of an `http://` or `https://` URL (any path is dropped); nil for anything else,
    /// including `null` (a sandboxed or local page), which no operator can list.
    public static func normalize(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let scheme: String
        if trimmed.hasPrefix("https://") { scheme = "https" } else if trimmed.hasPrefix("http://") { scheme = "http" } else { return nil }
        let rest = trimmed.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var host = Substring(authority)
        var port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                port = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        }
        guard !host.isEmpty else { return nil }
        if let port {
            guard let number = Int(port), (1...65535).contains(number) else { return nil }
            let isDefault = (scheme == "https" && number == 443) || (scheme == "http" && number == 80)
            return isDefault ? "\(scheme)://\(host)" : "\(scheme)://\(host):\(number)"
        }
        return "\(scheme)://\(host)"
    }
}
