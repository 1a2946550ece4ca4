import Foundation
import NIOCore
import NIOPosix
import PostgresNIO

/// Why a PostgreSQL store call failed, worded for the operator reading the relay's log. The relay
/// answers the request with `internal` whatever the case.
public enum PostgresStoreError: Error, CustomStringConvertible, Sendable {
    /// No answer in time: the server is down, unreachable, or too slow. The call's transaction is not
    /// committed by the relay; PostgreSQL's own statement timeout rolls back what reached it.
    case timeout(operation: String, after: Duration)
    /// The server or the connection reported an error.
    case failed(operation: String, reason: String)
    /// The first connection, at start, could not be made: `reason` in words an operator acts on (refused,
    /// authentication failed, timed out), `detail` what the driver said.
    case cannotConnect(server: String, reason: String, detail: String)

    public var description: String {
        switch self {
        case let .timeout(operation, after):
            "PostgreSQL did not answer \(operation) within \(after.seconds) s (is the server running and reachable?)"
        case let .failed(operation, reason):
            "PostgreSQL \(operation) failed: \(reason)"
        case let .cannotConnect(server, reason, _):
            "cannot connect to PostgreSQL at \(server): \(reason)"
        }
    }

    /// A failed first connection to `location`, worded by its cause.
    static func connectFailure(_ error: any Error, location: PostgresLocation) -> PostgresStoreError {
        let detail = (error as? PostgresStoreError)?.description ?? reason(of: error)
        return .cannotConnect(server: "\(location.host):\(location.port)", reason: words(for: error, user: location.username),
                              detail: detail)
    }

    private static func words(for error: any Error, user: String) -> String {
        if case .timeout(_, let after)? = error as? PostgresStoreError {
            return "timed out: no answer within \(after.seconds) s (--store-timeout; is the host reachable, and PostgreSQL on that port?)"
        }
        guard let psql = error as? PSQLError else { return reason(of: error) }
        if let state = psql.serverInfo?[.sqlState], state.hasPrefix("28") {  // class 28: invalid authorization
            return "authentication failed for user \(user) (check the user and password in --store)"
        }
        if let refused = psql.underlying as? NIOConnectionError {
            let errnos = refused.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
            if errnos.contains(ECONNREFUSED) { return "connection refused (is PostgreSQL running and listening on that port?)" }
            if refused.dnsAError != nil, refused.dnsAAAAError != nil, errnos.isEmpty { return "no such host" }
        }
        return reason(of: error)
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
