import ArgumentParser
import Foundation

/// `--timeout` for long-running commands: a watchdog that ends the process with the timeout
/// status, so a script or test never hangs on a walk that never comes.
enum Deadline {
    /// The longest `--timeout`: a week. Infinity, NaN or a huge number would trap in `Duration`, not time out.
    static let maximumSeconds = 604_800.0

    /// Checks a command's `--timeout` while its arguments are parsed, before it connects.
    static func validate(_ seconds: Double?) throws {
        guard let seconds else { return }
        guard seconds > 0, seconds <= maximumSeconds else {
            throw ValidationError("--timeout must be more than 0 and at most \(Int(maximumSeconds)) seconds (a week)")
        }
    }

    static func arm(_ seconds: Double?, console: Console, what: String) -> Task<Void, Never>? {
        guard let seconds else { return nil }
        return Task.detached {
            try? await Task.sleep(for: .seconds(seconds))
            guard !Task.isCancelled else { return }
            let error = CLIError.timeout("\(what) did not finish within \(seconds) s")
            ErrorReporter.report(error, json: console.json)
            exit(error.exitCode)
        }
    }
}
