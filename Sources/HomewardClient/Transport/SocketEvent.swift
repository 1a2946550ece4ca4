import NIOCore

/// What a WebSocket connection hands up to the client: text messages in order, then how it ended.
enum SocketEvent: Sendable {
    case text(ByteBuffer)
    case closed(SocketClosure)
}

/// How a connection ended: the close code and reason the relay sent, or the error that broke it.
public struct SocketClosure: Sendable, Equatable, CustomStringConvertible {
    /// The WebSocket close code, when the relay sent a close frame.
    public var code: UInt16?
    public var reason: String

    public init(code: UInt16?, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String {
        switch (code, reason.isEmpty) {
        case (let code?, false): return "closed by the relay (\(code): \(reason))"
        case (let code?, true): return "closed by the relay (\(code))"
        case (nil, false): return reason
        case (nil, true): return "connection lost"
        }
    }
}
