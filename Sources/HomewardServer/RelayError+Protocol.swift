import HomewardCore
import HomewardProtocol

/// The one place core errors become wire error codes.
extension RelayError {
    var protocolError: ProtocolError {
        switch self {
        case .invalid(let message): return ProtocolError(.badRequest, message)
        case .unauthenticated(let message): return ProtocolError(.unauthenticated, message)
        case .forbidden(let message): return ProtocolError(.forbidden, message)
        case .notFound(let message): return ProtocolError(.notFound, message)
        case .conflict(let message): return ProtocolError(.conflict, message)
        case .rateLimited(let message): return ProtocolError(.rateLimited, message)
        case .storage: return ProtocolError(.internal, "the relay could not store that; try again")
        }
    }
}
