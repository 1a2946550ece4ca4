import Foundation
import HomewardTestSupport
import Synchronization
import XCTest

/// The built `homeward-relay` executable as its own process on 127.0.0.1, so that tests can
/// kill it with SIGKILL (no shutdown, no last write) and start it again on the same data directory.
final class RelayProcess: Sendable {
    let dataDirectory: String
    let arguments: [String]
    /// Added to this process's environment for the relay (`HOMEWARD_*` variables).
    let environment: [String: String]
    private let current = Mutex<(process: Process, port: Int)?>(nil)
    /// What the process last launched wrote (stdout and stderr: its log).
    private let lastLog = Mutex<ProcessLog?>(nil)

    /// The output of the process last launched; its lines are complete once it has exited.
    var log: ProcessLog {
        get throws {
            guard let log = lastLog.withLock({ $0 }) else { throw TestFailure("the relay process never ran") }
            return log
        }
    }

    var caPath: String { dataDirectory + "/certs/dev-ca.pem" }

    var port: Int {
        get throws {
            guard let port = current.withLock({ $0?.port }) else { throw TestFailure("the relay process is not running") }
            return port
        }
    }

    /// Starts the relay on a free loopback port with a new data directory; `arguments` are extra flags,
    /// `environment` extra variables. `prepare` gets the data directory, made and empty, before the relay starts
    /// (to fill its store).
    static func start(_ arguments: [String] = [], environment: [String: String] = [:],
                      prepare: ((String) async throws -> Void)? = nil) async throws -> RelayProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-kill-\(UUID().uuidString)").path
        if let prepare {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            do { try await prepare(directory) } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
        }
        let relay = RelayProcess(dataDirectory: directory, arguments: arguments, environment: environment)
        try await relay.launch()
        return relay
    }

    private init(dataDirectory: String, arguments: [String], environment: [String: String]) {
        self.dataDirectory = dataDirectory
        self.arguments = arguments
        self.environment = environment
    }

    /// Starts the process and waits until its log says where it listens.
    func launch() async throws {
        let (process, output) = try Self.process(dataDirectory: dataDirectory, [
            "--port", "0", "--registrations-per-address", "0",
            // Relays started at once must not compete for the metrics listener's default port.
            "--metrics-listen", "127.0.0.1:0",
        ] + arguments, environment: environment)
        let log = ProcessLog()
        lastLog.withLock { $0 = log }
        let ports = firstMatchingLine(of: output.fileHandleForReading, log: log) { line -> Int? in
            guard let range = line.range(of: "address=wss://127.0.0.1:") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        try process.run()
        let port: Int
        do {
            port = try await withTimeout(60, "homeward-relay to start listening") {
                for await port in ports { return port }
                throw TestFailure("homeward-relay exited before listening")
            }
        } catch {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw error
        }
        current.withLock { $0 = (process, port) }
    }

    /// `homeward-relay` on 127.0.0.1, not yet running, with `arguments` and `environment` added to this process's; its
    /// output (stdout and stderr) is the returned pipe.
    static func process(dataDirectory: String, _ arguments: [String], environment: [String: String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = try executable()
        process.arguments = ["--host", "127.0.0.1", "--data-dir", dataDirectory, "--pbkdf2-iterations", "210000",
                             "--log-level", "info"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        return (process, output)
    }

    /// The running process, forgotten: whoever takes it ends it.
    private func take() -> Process? {
        current.withLock { state in
            defer { state = nil }
            return state?.process
        }
    }

    /// kill -9: the relay gets no chance to close connections or finish anything.
    func kill() {
        guard let process = take() else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Sends `signal` (SIGTERM, SIGINT) and returns the exit status once the process has ended.
    func stop(with signal: Int32, within seconds: Double = 30) async throws -> Int32 {
        guard let process = take() else { throw TestFailure("the relay process is not running") }
        Foundation.kill(process.processIdentifier, signal)
        do {
            return try await withTimeout(seconds, "homeward-relay to exit after signal \(signal)") {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async {
                        process.waitUntilExit()
                        continuation.resume(returning: process.terminationStatus)
                    }
                }
            }
        } catch {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw error
        }
    }

    /// SIGKILL, then start again on the same data directory.
    func killAndRestart() async throws {
        kill()
        try await launch()
    }

    /// SIGKILL, stay dead until the wall clock has passed `time` (Unix ms) — for deadlines that must
    /// fall while no relay runs, which only real time can arrange — then start again.
    func killAndRestart(after time: Int64) async throws {
        kill()
        let wait = time - Int64(Date().timeIntervalSince1970 * 1000) + 200
        if wait > 0 { try await Task.sleep(for: .milliseconds(wait)) }
        try await launch()
    }

    /// Ends the process and removes the data directory.
    func stop() {
        kill()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }

    func connect(label: String) async throws -> TestClient {
        try await TestClient.connect(port: port, caPath: caPath, label: label)
    }

    /// Registers a new user (a unique name from `base`) on a connection of its own.
    func register(_ base: String) async throws -> (username: String, token: String, client: TestClient) {
        let username = TestRelay.uniqueUsername(base)
        let client = try await connect(label: username)
        let reply = try await client.ok("register", ["username": .string(username), "password": "correct horse battery"])
        return (username, try XCTUnwrap(reply["token"]?.stringValue), client)
    }

    /// The executable next to the test bundle (`swift build --build-tests` builds both).
    static func executable() throws -> URL {
        var candidates: [URL] = []
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("homeward-relay"))
        }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("homeward-relay"))
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/homeward-relay"))
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
            return candidate
        }
        throw TestFailure("no homeward-relay executable next to the tests; run `swift build --build-tests` first")
    }
}

/// Runs `homeward-relay` on 127.0.0.1 with a new data directory, `arguments` (which may name the port) and
/// `environment` until it exits by itself, for a relay that must not start; SIGKILL and a failure when it is
/// still running after `seconds` (it hangs). Returns its exit status and its log.
func runRelayUntilItExits(_ arguments: [String], environment: [String: String] = [:],
                          within seconds: Double = 60) async throws -> (status: Int32, log: ProcessLog) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-exit-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let (process, output) = try RelayProcess.process(dataDirectory: directory, arguments, environment: environment)
    let log = ProcessLog()
    // Never matches: only drains the output into `log`, which ends when the process exits.
    _ = firstMatchingLine(of: output.fileHandleForReading, log: log) { _ -> Bool? in nil }
    try process.run()
    // The guard that turns a hang into a failure: killed, the process closes its output, which ends the wait below.
    let pid = process.processIdentifier
    let hung = Atomic<Bool>(false)
    let guardTask = Task {
        try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        hung.store(true, ordering: .sequentiallyConsistent)
        Foundation.kill(pid, SIGKILL)
    }
    _ = await log.allLines
    guardTask.cancel()
    process.waitUntilExit()
    if hung.load(ordering: .sequentiallyConsistent) {
        throw TestFailure("homeward-relay was still running \(seconds) s after its start (killed); its log:\n"
                          + (await log.allLines).joined(separator: "\n"))
    }
    return (process.terminationStatus, log)
}

/// Runs `homeward-relay` with `arguments` (after a loopback host, port 0 and a data directory that does not
/// exist) to its end, for flags that stop it before it listens or touches the data directory, and `--help`.
/// `environment` is added to this process's environment.
func runRelayToEnd(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    try runToEnd(RelayProcess.executable(),
                 ["--host", "127.0.0.1", "--port", "0", "--data-dir", "/nonexistent/homeward-flag-test"] + arguments,
                 environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
}
