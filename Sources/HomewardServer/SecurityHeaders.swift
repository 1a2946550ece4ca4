import NIOHTTP1

/// Headers every HTTP answer of the relay carries, pages or not: the page may run only the relay's own
/// scripts (and service worker), talk only to the relay, show images only from the relay and the configured tile server,
/// never be framed, and never leak its address in a Referer.
struct SecurityHeaders: Sendable {
    /// Image sources besides the relay itself: the tile server when one is configured, else none.
    let tileSource: String?

    func add(to headers: inout HTTPHeaders, host: String?) {
        headers.add(name: "Content-Security-Policy", value: contentSecurityPolicy(host: host))
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        headers.add(name: "Strict-Transport-Security", value: "max-age=31536000")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "X-Frame-Options", value: "DENY")
        headers.add(name: "Cross-Origin-Opener-Policy", value: "same-origin")
        headers.add(name: "Permissions-Policy", value: "geolocation=(self), camera=(), microphone=(), payment=()")
    }

    /// `connect-src 'self'` covers wss: of the same host in CSP 3; browsers that predate that need the
    /// explicit `wss://HOST`, taken from the Host header only when it is a plain host[:port].
    func contentSecurityPolicy(host: String?) -> String {
        var connect = "'self'"
        if let host, Self.isPlainHost(host) { connect += " wss://\(host)" }
        var images = "'self'"
        // Leaflet's tile layer blanks a tile it drops with a data: GIF; without tiles nothing needs data:.
        if let tileSource { images += " data: \(tileSource)" }
        return [
            "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src \(images)",
            "connect-src \(connect)", "worker-src 'self'", "font-src 'self'", "manifest-src 'self'", "media-src 'self'",
            "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
        ].joined(separator: "; ")
    }

    /// A DNS name or IPv4 address with an optional port, or a bracketed IPv6 address: nothing that could
    /// end the directive or add a source.
    static func isPlainHost(_ host: String) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 260 else { return false }
        let (name, port): (Substring, Substring?)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let address = host[host.index(after: host.startIndex)..<close]
            guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return false }
            (name, port) = ("x", rest.isEmpty ? nil : rest.dropFirst())
        } else {
            let parts = host.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return false }
            (name, port) = (parts[0], parts.count == 2 ? parts[1] : nil)
        }
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) else { return false }
        if let port { return (1...5).contains(port.count) && port.allSatisfy { $0.isASCII && $0.isNumber } }
        return true
    }
}
