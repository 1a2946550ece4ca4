import Foundation

/// Runs a program to its end and returns its exit status and its output (stdout and stderr together).
func runToEnd(_ executable: URL, _ arguments: [String],
              environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}

/// Runs `homeward-relay` with `arguments` (after a loopback host, port 0 and a data directory that does not
/// exist) to its end, for flags that stop it before it listens or touches the data directory, and `--help`.
/// `environment` is added to this process's environment.
func runRelayToEnd(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    try runToEnd(RelayProcess.executable(),
                 ["--host", "127.0.0.1", "--port", "0", "--data-dir", "/nonexistent/homeward-flag-test"] + arguments,
                 environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
}
