/// Everything the NATS client can fail with. Underlying socket errors are kept as text so that the
/// error stays `Equatable` and `Sendable` and tests can compare it.
public enum NATSError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A server URL that is not `nats://[user:pass@]host[:port]`.
    case invalidURL(String)
    /// `connect` was given no URL.
    case noServers
    /// A subject with whitespace, an empty token, or (for a publish) a wildcard.
    case invalidSubject(String)
    /// A queue group name that is empty or contains whitespace.
    case invalidQueueGroup(String)
    /// `connect` tried every server once and none completed the handshake; the last reason.
    case connectFailed(String)
    /// The client was closed (by `close()`, or after giving up reconnecting).
    case closed
    /// An operation that needs a live connection (`flush`) was called while reconnecting.
    case notConnected
    /// Publishes made while disconnected exceeded the reconnect buffer; this one was not sent.
    case reconnectBufferFull(limit: Int)
    /// The payload is larger than the server's `max_payload` (from its INFO).
    case payloadTooLarge(size: Int, limit: Int)
    /// No reply within the request's timeout (core NATS gives no "no responders" answer without headers).
    case timeout
    /// The connection broke while an operation waited for the server (`flush`).
    case connectionLost(String)
    /// The server sent bytes that are not the NATS protocol.
    case protocolError(String)
    /// The server answered with `-ERR` during the handshake (for example `Authorization Violation`).
    case serverError(String)

    public var description: String {
        switch self {
        case .invalidURL(let url): "invalid NATS URL '\(url)': expected nats://[user:pass@]host[:port]"
        case .noServers: "no NATS server URL given"
        case .invalidSubject(let subject): "invalid NATS subject '\(subject)'"
        case .invalidQueueGroup(let group): "invalid NATS queue group '\(group)'"
        case .connectFailed(let reason): "could not connect to any NATS server: \(reason)"
        case .closed: "the NATS client is closed"
        case .notConnected: "the NATS client is reconnecting"
        case .reconnectBufferFull(let limit): "NATS reconnect buffer full (\(limit) bytes): publish not sent"
        case .payloadTooLarge(let size, let limit): "NATS payload of \(size) bytes exceeds the server's max_payload \(limit)"
        case .timeout: "NATS request timed out"
        case .connectionLost(let reason): "NATS connection lost: \(reason)"
        case .protocolError(let reason): "NATS protocol error: \(reason)"
        case .serverError(let message): "NATS server error: \(message)"
        }
    }
}
