/// The error codes of the wire contract (docs/protocol.md, "Error codes").
public enum ErrorCode: String, Sendable, CaseIterable {
    case badRequest = "bad_request"
    case unsupported
    case unauthenticated
    case forbidden
    case notFound = "not_found"
    case conflict
    case rateLimited = "rate_limited"
    case tooLarge = "too_large"
    case `internal`
}

/// A failure that is reported to the client as an `error` reply.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public static func badRequest(_ message: String) -> ProtocolError { ProtocolError(.badRequest, message) }
}

/// WebSocket close codes the relay uses (RFC 6455 section 7.4.1).
public enum CloseCode: UInt16, Sendable {
    case normal = 1000
    case goingAway = 1001
    case protocolError = 1002
    case invalidPayload = 1007
    case policyViolation = 1008
    case messageTooBig = 1009
    case internalError = 1011
}
