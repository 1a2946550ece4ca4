import Foundation
import HomewardPostgres
import HomewardTestSupport
import Synchronization

/// A real PostgreSQL server for tests, never a mock: `initdb` (as the postgres user, since tests run as
/// root and PostgreSQL refuses to run as root) in a temporary directory, then `postgres` as a child
/// process on 127.0.0.1 and a free port. One server serves a whole test class or suite; each test
/// gets its own database. `remove()` stops it and deletes the directory.
package final class PostgresServer: Sendable {
    /// Set to 1 to skip the PostgreSQL tests on a machine without PostgreSQL; otherwise they fail.
    package static let skipVariable = "HOMEWARD_SKIP_POSTGRES"

    /// What a test can have: a server, a deliberate skip, or a failure that says what is missing.
    package enum Availability: Sendable {
        case running(PostgresServer)
        case skipped
        case unavailable(String)

        /// The server, nil when skipped; throws when PostgreSQL is missing or did not start.
        package func server() throws -> PostgresServer? {
            switch self {
            case .running(let server): return server
            case .skipped: return nil
            case .unavailable(let reason): throw TestFailure(reason)
            }
        }
    }

    package let directory: String
    package let port: Int
    private let binaries: String
    private let current = Mutex<Process?>(nil)

    private init(directory: String, port: Int, binaries: String) {
        self.directory = directory
        self.port = port
        self.binaries = binaries
    }

    /// Starts a server, or says why not (HOMEWARD_SKIP_POSTGRES=1, PostgreSQL not installed, start failed).
    package static func startIfAvailable() async -> Availability {
        if ProcessInfo.processInfo.environment[skipVariable] == "1" { return .skipped }
        guard let binaries = installedBinaries() else {
            return .unavailable("""
                PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): install the Debian package \
                postgresql (as .ci/run does), or set \(skipVariable)=1 to skip the PostgreSQL tests
                """)
        }
        do { return .running(try await start(binaries: binaries)) } catch {
            return .unavailable("PostgreSQL did not start: \(error)")
        }
    }

    /// The newest installed version's bin directory.
    private static func installedBinaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }.reversed()
            .map { "\(root)/\($0)/bin" }
            .first { FileManager.default.isExecutableFile(atPath: "\($0)/postgres") }
    }

    private static func start(binaries: String) async throws -> PostgresServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-pg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let server = PostgresServer(directory: directory, port: try freePort(), binaries: binaries)
        do {
            try await offThePool {
                try run("/bin/chown", ["postgres:postgres", directory])
                try server.runAsPostgres("\(binaries)/initdb", ["-D", server.dataDirectory, "-U", "postgres", "-A", "trust",
                                                               "-E", "UTF8", "--no-locale", "--no-sync"])
            }
            try await server.start()
        } catch {
            server.remove()
            throw error
        }
        return server
    }

    /// Runs `body`, which waits for processes, on a Dispatch thread rather than one of the concurrency pool's. On a
    /// two-core machine the pool has two threads: each suite's initdb (seconds on a busy machine) holding one would
    /// hold up every other test's awaits meanwhile, and a test that measures how soon it was answered would see
    /// that wait as its own.
    private static func offThePool(_ body: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    package var dataDirectory: String { directory + "/data" }

    /// The URL of `database` on this server (no TLS, no password: trust on loopback).
    package func location(database: String) -> PostgresLocation {
        PostgresLocation(host: "127.0.0.1", port: port, username: "postgres", database: database, tls: .disable)
    }

    package var isRunning: Bool { current.withLock { $0?.isRunning ?? false } }

    /// Starts `postgres` on the data directory and returns once its log says it accepts connections.
    /// Durability settings are off: these databases are thrown away, and it keeps the tests quick.
    package func start() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // setpriv execs postgres in place (runuser would stay in between), so signals reach the server itself.
        process.arguments = ["--reuid=postgres", "--regid=postgres", "--init-groups", "\(binaries)/postgres",
                             "-D", dataDirectory, "-k", directory, "-h", "127.0.0.1", "-p", "\(port)",
                             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let ready = firstMatchingLine(of: output.fileHandleForReading) { line in
            line.contains("ready to accept connections") ? true : nil
        }
        try process.run()
        current.withLock { $0 = process }
        let accepting = try await withTimeout(30, "PostgreSQL to accept connections") {
            for await accepting in ready { return accepting }
            return false
        }
        guard accepting else {
            process.waitUntilExit()
            throw TestFailure("postgres exited (status \(process.terminationStatus)) before accepting connections")
        }
    }

    /// Stops the server (fast shutdown: open connections are closed) and waits until it has exited.
    package func stop() {
        guard let process = current.withLock({ slot in defer { slot = nil }; return slot }) else { return }
        if process.isRunning { kill(process.processIdentifier, SIGINT) }
        process.waitUntilExit()
    }

    /// Stops the server and deletes its directory.
    package func remove() {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Creates an empty database and returns its location.
    package func createDatabase(_ name: String = "t_\(UUID().uuidString.prefix(8).lowercased())") throws -> PostgresLocation {
        try psql("CREATE DATABASE \(name)")
        return location(database: name)
    }

    /// Runs one SQL command as the superuser through psql.
    package func psql(_ sql: String, database: String = "postgres") throws {
        try Self.run("\(binaries)/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", "\(port)",
                                          "-U", "postgres", "-d", database, "-c", sql])
    }

    /// Runs one SQL query as the superuser through psql; returns its result unaligned, without headers.
    package func psqlValue(_ sql: String, database: String = "postgres") throws -> String {
        let arguments = ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", "\(port)",
                         "-U", "postgres", "-d", database, "-c", sql]
        let (status, output) = try runToEnd(URL(fileURLWithPath: "\(binaries)/psql"), arguments)
        guard status == 0 else { throw TestFailure("psql \(sql) failed (\(status)): \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func runAsPostgres(_ tool: String, _ arguments: [String]) throws {
        try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", tool] + arguments)
    }

    /// Runs a tool to its end; throws with its output when it fails.
    private static func run(_ tool: String, _ arguments: [String]) throws {
        let (status, output) = try runToEnd(URL(fileURLWithPath: tool), arguments)
        guard status == 0 else {
            throw TestFailure("\(tool) \(arguments.joined(separator: " ")) failed (\(status)): \(output)")
        }
    }

    /// A loopback port nobody listens on right now.
    package static func freePort() throws -> Int {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw TestFailure("socket() failed") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(socket, generic, length) == 0 && getsockname(socket, generic, &length) == 0
            }
        }
        guard bound else { throw TestFailure("cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
