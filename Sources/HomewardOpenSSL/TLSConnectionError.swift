/// Why a TLS connection on the system's OpenSSL failed. The handler fires these down its pipeline
/// (`errorCaught`); the text is OpenSSL's own reason (e.g. "wrong version number").
public enum TLSConnectionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The client's bytes were not an acceptable TLS handshake (garbage, an old version, no common cipher).
    case handshakeFailed(reason: String)
    /// The peer closed the TCP connection before the handshake finished.
    case closedDuringHandshake
    /// A record after the handshake could not be decrypted or was not allowed (e.g. renegotiation).
    case protocolViolation(reason: String)
    /// The peer closed the TCP connection without a `close_notify` (the last data may be cut short).
    case uncleanShutdown
    /// A write after this side or the peer closed the TLS session.
    case closed

    public var description: String {
        switch self {
        case .handshakeFailed(let reason): return "TLS handshake failed: \(reason)"
        case .closedDuringHandshake: return "TLS: the peer closed the connection during the handshake"
        case .protocolViolation(let reason): return "TLS error: \(reason)"
        case .uncleanShutdown: return "TLS: the peer closed the connection without close_notify"
        case .closed: return "TLS: the session is closed"
        }
    }
}

/// Why a server context could not be built; `reason` is OpenSSL's error text.
public enum OpenSSLSetupError: Error, Equatable, Sendable, CustomStringConvertible {
    case context(reason: String)
    case certificateChain(path: String, reason: String)
    case privateKey(path: String, reason: String)
    case keyDoesNotMatchCertificate(reason: String)

    public var description: String {
        switch self {
        case .context(let reason): return "OpenSSL: cannot set up a server context: \(reason)"
        case .certificateChain(let path, let reason): return "OpenSSL: cannot load the certificate chain \(path): \(reason)"
        case .privateKey(let path, let reason): return "OpenSSL: cannot load the private key \(path): \(reason)"
        case .keyDoesNotMatchCertificate(let reason): return "OpenSSL: the private key does not match the certificate: \(reason)"
        }
    }
}
