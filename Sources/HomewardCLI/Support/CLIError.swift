import HomewardClient
import HomewardProtocol

/// A failure to report as one line and an exit status.
///
/// `code` is the contract's error code when the relay refused (so scripts can branch on
/// `not_found` or `conflict`), or one of this tool's own: `connection`, `tls`, `usage`,
/// `profile`, `file`, `timeout`.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var exitCode: Int32

    public init(code: String, message: String, exitCode: Int32) {
        self.code = code
        self.message = message
        self.exitCode = exitCode
    }

    public var description: String { "error [\(code)]: \(message)" }

    /// Exit statuses, documented in docs/cli.md.
    public enum Status {
        /// The relay refused the request (an `error` reply).
        public static let rejected: Int32 = 1
        /// The relay could not be reached, TLS failed, or the connection was lost.
        public static let connection: Int32 = 2
        /// A local problem: no profile or token, unreadable file.
        public static let local: Int32 = 3
        /// Something did not happen in time (e.g. `follow --timeout`).
        public static let timeout: Int32 = 4
        /// `sim` saw lost or duplicated deliveries.
        public static let simulationFailed: Int32 = 5
        /// Bad command line (the same value ArgumentParser uses, EX_USAGE).
        public static let usage: Int32 = 64
    }

    static func usage(_ message: String) -> CLIError { CLIError(code: "usage", message: message, exitCode: Status.usage) }
    static func profile(_ message: String) -> CLIError { CLIError(code: "profile", message: message, exitCode: Status.local) }
    static func file(_ message: String) -> CLIError { CLIError(code: "file", message: message, exitCode: Status.local) }
    static func timeout(_ message: String) -> CLIError { CLIError(code: "timeout", message: message, exitCode: Status.timeout) }

    init(_ error: RelayClientError) {
        switch error {
        case .rejected(let refusal):
            self.init(code: refusal.code.rawValue, message: refusal.message, exitCode: Status.rejected)
        case .tlsSetup(let reason):
            self.init(code: "tls", message: reason, exitCode: Status.connection)
        case .timedOut:
            self.init(code: "timeout", message: error.description, exitCode: Status.connection)
        case .connectFailed, .connectionLost, .notConnected, .closed, .unexpectedReply:
            self.init(code: "connection", message: error.description, exitCode: Status.connection)
        }
    }

    init(_ error: ProtocolError) {
        self.init(code: error.code.rawValue, message: error.message, exitCode: Status.usage)
    }
}
