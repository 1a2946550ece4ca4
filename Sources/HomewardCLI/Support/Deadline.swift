import Foundation

/// `--timeout` for long-running commands: a watchdog that ends the process with the timeout
/// status, so a script or test never hangs on a walk that never comes.
enum Deadline {
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
