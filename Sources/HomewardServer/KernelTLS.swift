import Foundation

/// Kernel TLS (`--ktls`): whether this relay can hand its TLS records to the kernel, and if not, why.
///
/// OpenSSL 3 moves a connection's records into the kernel (`SSL_OP_ENABLE_KTLS`) only where three things
/// hold: the kernel has the `tls` upper-layer protocol (`CONFIG_TLS`, listed in
/// `/proc/sys/net/ipv4/tcp_available_ulp` once loaded), OpenSSL serves the connection (BoringSSL in
/// swift-nio-ssl has no kTLS), and OpenSSL owns the socket: it installs the keys with `BIO_set_ktls` on
/// the SSL's own BIO, which a socket BIO implements and a memory BIO refuses. The relay's OpenSSL handler
/// gives OpenSSL its records through memory BIOs (NIO owns the socket), so the third never holds in this
/// version: with `--ktls` the relay refuses to start and says which of the three are missing, rather than
/// start without what the flag asks for.
public enum KernelTLS {
    /// Where Linux lists the TCP upper-layer protocols it can attach to a socket (`tls` among them once the
    /// module is loaded).
    public static let availableULPPath = "/proc/sys/net/ipv4/tcp_available_ulp"

    /// Whether the contents of `tcp_available_ulp` (names separated by spaces, e.g. "mptcp tls\n") list `tls`.
    public static func kernelOffersTLS(availableULP contents: String) -> Bool {
        contents.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).contains("tls")
    }

    /// Why `--ktls` cannot be served, each worded for the operator; empty if it can.
    /// - Parameter availableULP: the file's contents, or nil when it could not be read (no such kernel feature).
    public static func obstacles(backend: TLSBackend, availableULP: String?) -> [String] {
        var reasons: [String] = []
        if backend != .openssl {
            reasons.append("kTLS needs --tls-backend openssl (the TLS backend is \(backend), and swift-nio-ssl's BoringSSL has no kernel TLS)")
        }
        if let contents = availableULP {
            if !kernelOffersTLS(availableULP: contents) {
                let listed = contents.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                reasons.append("the kernel has no tls module loaded (\(availableULPPath) lists \(listed.isEmpty ? "nothing" : "only: \(listed)"); `modprobe tls` loads it on kernels built with CONFIG_TLS)")
            }
        } else {
            reasons.append("this kernel has no \(availableULPPath) (no TCP upper-layer protocols, so no kernel TLS)")
        }
        reasons.append("the relay's OpenSSL handler passes records through memory buffers, and OpenSSL hands a connection's keys to the kernel only on a socket it owns itself")
        return reasons
    }

    /// `obstacles` for this machine's kernel.
    static func obstaclesOnThisMachine(backend: TLSBackend) -> [String] {
        obstacles(backend: backend, availableULP: try? String(contentsOfFile: availableULPPath, encoding: .utf8))
    }
}
