import Foundation
import NIOCore

/// Why the relay could not start, worded for the operator who has to fix it.
public enum RelayStartupError: Error, CustomStringConvertible, Sendable {
    case cannotCreateDataDirectory(path: String, reason: String)
    case cannotOpenDatabase(path: String, reason: String)
    /// The first connection to the PostgreSQL server of `--store` failed (refused, authentication, timeout).
    case cannotConnectDatabase(server: String, reason: String)
    case cannotListen(host: String, port: Int, reason: String)
    case cannotLoadWebApp(reason: String)
    case cannotConnectBus(String, reason: String)
    case badVAPIDKey(path: String, reason: String)
    case badVAPIDSubject(String, reason: String)
    /// The VAPID key a shared store keeps for every relay cannot be read or used.
    case badSharedVAPIDKey(store: String, reason: String)
    /// `--ktls` was given, and kernel TLS cannot serve this relay's connections (`KernelTLS.obstacles`).
    case kernelTLSUnavailable(reasons: [String])

    public var description: String {
        switch self {
        case .cannotCreateDataDirectory(let path, let reason):
            return "cannot create the data directory \(path): \(reason)"
        case .cannotOpenDatabase(let path, let reason):
            return "cannot open the database \(path): \(reason)"
        case .cannotConnectDatabase(let server, let reason):
            return "cannot connect to PostgreSQL at \(server) (--store): \(reason)"
        case .cannotListen(let host, let port, let reason):
            return "cannot listen on \(host):\(port): \(reason)"
        case .cannotLoadWebApp(let reason):
            return "cannot load the web app: \(reason)"
        case .cannotConnectBus(let bus, let reason):
            return "cannot connect to the bus \(bus): \(reason)"
        case .badVAPIDKey(let path, let reason):
            return "cannot use the VAPID key \(path): \(reason)"
        case .badVAPIDSubject(let subject, let reason):
            return "cannot use the VAPID subject '\(subject)': \(reason)"
        case .badSharedVAPIDKey(let store, let reason):
            return "cannot use the VAPID key kept in \(store): \(reason)"
        case .kernelTLSUnavailable(let reasons):
            return "cannot use kernel TLS (--ktls): " + reasons.joined(separator: "; ") + ". Leave out --ktls (HOMEWARD_KTLS)"
        }
    }

    /// The POSIX reason under a Foundation file error, which on its own says little.
    static func fileReason(_ error: any Error) -> String {
        if let posix = (error as NSError).userInfo[NSUnderlyingErrorKey] as? POSIXError {
            return String(cString: strerror(posix.code.rawValue))
        }
        return (error as NSError).localizedDescription
    }

    /// The reason of a failed bind, with a hint for the usual causes.
    static func listenReason(_ error: any Error, flag: String = "--port") -> String {
        guard let io = error as? IOError else { return "\(error)" }
        let hostFlag = flag == "--port" ? "--host" : flag
        switch io.errnoCode {
        case EADDRINUSE: return "the address is already in use (another relay or program has this port; choose another with \(flag))"
        case EACCES: return "permission denied (ports below 1024 need privileges; choose another with \(flag))"
        case EADDRNOTAVAIL: return "this machine has no such address (check \(hostFlag))"
        default: return String(cString: strerror(io.errnoCode))
        }
    }
}
