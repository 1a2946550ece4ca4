import ArgumentParser
import Foundation
import HomewardClient
import HomewardProtocol

/// The entry point of the `homeward` executable: parses, runs, and turns any failure into
/// one line (or one JSON object with `--json`) and a documented exit status.
public enum HomewardMain {
    public static func run(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) async -> Never {
        // A reader that goes away (`homeward watch | head`) must end us quietly, not with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let json = arguments.contains("--json")
        do {
            var command = try HomewardCommand.parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit(0)
        } catch {
            if let failure = ErrorReporter.cliError(error) {
                ErrorReporter.report(failure, json: json)
                exit(failure.exitCode)
            }
            // --help, --version and usage errors: ArgumentParser knows how to print those.
            HomewardCommand.exit(withError: error)
        }
    }
}

/// Prints a failure the way every command does.
enum ErrorReporter {
    /// The CLI form of an error, or nil for ArgumentParser's own (help, usage).
    static func cliError(_ error: any Error) -> CLIError? {
        switch error {
        case let error as CLIError: return error
        case let error as RelayClientError: return CLIError(error)
        case let error as GPXError: return .file(error.description)
        case is CancellationError: return CLIError(code: "cancelled", message: "cancelled", exitCode: 130)
        default: return nil
        }
    }

    static func report(_ error: CLIError, json: Bool) {
        if json {
            let object: JSONValue = ["type": "error", "code": .string(error.code), "message": .string(error.message)]
            Console.write(JSONWriter.string(object) + "\n", to: STDOUT_FILENO)
        }
        Console.write("homeward: \(error)\n", to: STDERR_FILENO)
    }
}
