import PostgresNIO

/// Why a PostgreSQL store call failed, worded for the operator reading the relay's log. The relay
/// answers the request with `internal` whatever the case.
public enum PostgresStoreError: Error, CustomStringConvertible, Sendable {
    /// No answer in time: the server is down, unreachable, or too slow. The call's transaction is not
    /// committed by the relay; PostgreSQL's own statement timeout rolls back what reached it.
    case timeout(operation: String, after: Duration)
    /// The server or the connection reported an error.
    case failed(operation: String, reason: String)

    public var description: String {
        switch self {
        case let .timeout(operation, after):
            "PostgreSQL did not answer \(operation) within \(after.seconds) s (is the server running and reachable?)"
        case let .failed(operation, reason):
            "PostgreSQL \(operation) failed: \(reason)"
        }
    }

    /// `error` as a `failed` case, keeping the server's message. `PSQLError`'s own description hides
    /// everything (it may contain bound values); the server's message and the error code are enough here.
    static func wrap(_ error: any Error, operation: String) -> PostgresStoreError {
        if let own = error as? PostgresStoreError { return own }
        return .failed(operation: operation, reason: reason(of: error))
    }

    private static func reason(of error: any Error) -> String {
        switch error {
        case let transaction as PostgresTransactionError:
            let inner = transaction.closureError ?? transaction.commitError ?? transaction.beginError
            return inner.map { reason(of: $0) } ?? "the transaction failed"
        case let psql as PSQLError:
            var text = psql.code.description
            if let message = psql.serverInfo?[.message] { text += ": \(message)" }
            if let detail = psql.serverInfo?[.detail] { text += " (\(detail))" }
            if let underlying = psql.underlying { text += " (\(underlying))" }
            return text
        default:
            return "\(error)"
        }
    }
}

extension Duration {
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
