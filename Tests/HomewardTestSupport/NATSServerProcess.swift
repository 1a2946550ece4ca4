import Foundation
import Synchronization
import XCTest

/// A real `nats-server` as a child process on 127.0.0.1, for the NATS client's tests. The first start
/// lets the kernel pick a free port (`-p -1`); `restart()` kills the server (SIGKILL) and starts a new
/// one on the same port, which is what a client sees when its server is restarted.
package final class NATSServerProcess: Sendable {
    private let current = Mutex<Process?>(nil)
    package let port: Int
    /// `-c FILE` when started with a configuration, kept for restarts.
    private let arguments: [String]

    package var url: String { "nats://127.0.0.1:\(port)" }

    /// `configuration`: nats-server configuration file text (for settings without a flag, like `ping_interval`).
    package static func start(configuration: String? = nil) async throws -> NATSServerProcess {
        var arguments: [String] = []
        if let configuration {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("nats-test-\(UUID().uuidString).conf")
            try configuration.write(to: file, atomically: true, encoding: .utf8)
            arguments = ["-c", file.path]
        }
        let (process, port) = try await launch(port: -1, arguments: arguments)
        let server = NATSServerProcess(port: port, arguments: arguments)
        server.current.withLock { $0 = process }
        return server
    }

    private init(port: Int, arguments: [String]) {
        self.port = port
        self.arguments = arguments
    }

    /// Starts nats-server and returns once its log says it listens (it accepts from then on).
    private static func launch(port: Int, arguments: [String]) async throws -> (Process, Int) {
        let process = Process()
        process.executableURL = try executable()
        process.arguments = arguments + ["-a", "127.0.0.1", "-p", String(port)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let ports = firstMatchingLine(of: output.fileHandleForReading) { line -> Int? in
            guard let range = line.range(of: "Listening for client connections on 127.0.0.1:") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        try process.run()
        do {
            let listening = try await withTimeout(15, "nats-server to listen") {
                for await port in ports { return port }
                throw TestFailure("nats-server exited before listening (port \(port) taken?)")
            }
            return (process, listening)
        } catch {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw error
        }
    }

    /// kill -9: clients see their sockets close without any goodbye.
    package func kill() {
        guard let process = current.withLock({ state in defer { state = nil }; return state }) else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// A new server on the same port (after `kill()`, or killing the running one first).
    package func restart() async throws {
        kill()
        let (process, _) = try await Self.launch(port: port, arguments: arguments)
        current.withLock { $0 = process }
    }

    /// Ends the server and removes its configuration file.
    package func stop() {
        kill()
        if let file = arguments.last, arguments.first == "-c" { try? FileManager.default.removeItem(atPath: file) }
    }

    /// nats-server from the PATH or where the Debian package puts it.
    package static func executable() throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin", "/usr/local/bin"]
        for directory in directories {
            let candidate = URL(fileURLWithPath: directory).appendingPathComponent("nats-server")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw TestFailure("nats-server is not installed: the NATS client tests need a real server. "
            + "Install it with `apt-get install nats-server` (Debian/Ubuntu; .ci/run installs it in CI).")
    }
}
