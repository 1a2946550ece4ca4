/// Why the core refused an operation. The network edge maps each case to a protocol error code.
public enum RelayError: Error, Sendable, Equatable {
    case invalid(String)
    case unauthenticated(String)
    case forbidden(String)
    case notFound(String)
    case conflict(String)
    case rateLimited(String)
    case storage(String)
}
