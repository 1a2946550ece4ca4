import HomewardProtocol

/// Why a client call failed.
public enum RelayClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The relay answered with an `error` reply; carries the contract's error code.
    case rejected(ProtocolError)
    /// No connection could be opened: DNS, TCP, TLS or the WebSocket upgrade failed.
    case connectFailed(String)
    /// The connection went away before the reply came. The request may or may not have been
    /// served: the caller decides whether repeating it is safe.
    case connectionLost(SocketClosure)
    /// No reply in time.
    case timedOut(String)
    /// `connect()` was never called, or the client gave up reconnecting.
    case notConnected
    /// `close()` was called.
    case closed
    /// The relay sent something this client does not understand.
    case unexpectedReply(String)
    /// TLS could not be set up locally (e.g. an unreadable CA file).
    case tlsSetup(String)

    /// The contract's error code when the relay rejected the request.
    public var code: ErrorCode? {
        if case .rejected(let error) = self { return error.code }
        return nil
    }

    public var description: String {
        switch self {
        case .rejected(let error): return "\(error.code.rawValue): \(error.message)"
        case .connectFailed(let reason): return reason
        case .connectionLost(let closure): return "connection lost: \(closure)"
        case .timedOut(let what): return "timed out waiting for \(what)"
        case .notConnected: return "not connected to the relay"
        case .closed: return "the client was closed"
        case .unexpectedReply(let what): return "unexpected reply from the relay: \(what)"
        case .tlsSetup(let reason): return reason
        }
    }
}
