import Foundation
import HomewardProtocol
import HomewardTestSupport
import XCTest

/// The built `homeward` executable, run as a subprocess the way a person or script runs it.
final class CLIProcess: @unchecked Sendable {
    let process = Process()
    let arguments: [String]
    /// Standard output, line by line, as it is written.
    let lines: AsyncStream<String>
    private let stderrBuffer = LockedData()
    private let stdoutBuffer = LockedData()
    private let exited: AsyncStream<Int32>

    /// Standard input while `holdStdin` keeps it open, for a test playing a person who types late.
    private let heldInput: FileHandle?

    init(_ arguments: [String], environment: [String: String], stdin: String? = nil, holdStdin: Bool = false) throws {
        self.arguments = arguments
        process.executableURL = try Self.executable()
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe(), errors = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        let (lines, lineSink) = AsyncStream<String>.makeStream(bufferingPolicy: .unbounded)
        self.lines = lines
        let (exited, exitSink) = AsyncStream<Int32>.makeStream(bufferingPolicy: .unbounded)
        self.exited = exited
        process.terminationHandler = { process in
            exitSink.yield(process.terminationStatus)
            exitSink.finish()
        }
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        if holdStdin {
            heldInput = input.fileHandleForWriting
        } else {
            heldInput = nil
            try? input.fileHandleForWriting.close()
        }

        let stdoutBuffer = self.stdoutBuffer
        Self.readThread(output.fileHandleForReading) { chunk in
            for line in stdoutBuffer.appendAndTakeLines(chunk) { lineSink.yield(line) }
        } done: {
            if let rest = stdoutBuffer.takeRest() { lineSink.yield(rest) }
            lineSink.finish()
        }
        let stderrBuffer = self.stderrBuffer
        Self.readThread(errors.fileHandleForReading) { chunk in stderrBuffer.append(chunk) } done: {}
    }

    /// Reads a pipe on its own thread until end of file: reads block.
    private static func readThread(_ handle: FileHandle, _ chunk: @escaping @Sendable (Data) -> Void, done: @escaping @Sendable () -> Void) {
        let thread = Thread {
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                chunk(data)
            }
            done()
        }
        thread.start()
    }

    var stderr: String { stderrBuffer.text }

    /// Writes `text` to a held standard input and closes it.
    func type(_ text: String) {
        heldInput?.write(Data(text.utf8))
        try? heldInput?.close()
    }

    /// Waits for the process to end; returns its exit status.
    func exitStatus(within seconds: Double = 60) async throws -> Int32 {
        let exited = self.exited
        let name = arguments.first ?? "homeward"
        return try await withTimeout(seconds, "homeward \(name) to exit") {
            for await status in exited { return status }
            return -1
        }
    }

    /// Waits for and returns the next stdout line that is a JSON object matching `match`.
    func nextJSON(_ what: String, within seconds: Double = 30, where match: @escaping @Sendable (JSONValue) -> Bool) async throws -> JSONValue {
        let lines = self.lines
        let stderr = stderrBuffer
        do {
            return try await withTimeout(seconds, what) {
                for await line in lines {
                    guard let value = try? JSONParser.parse(line), match(value) else { continue }
                    return value
                }
                throw TestFailure("the output ended before \(what); stderr: \(stderr.text)")
            }
        } catch let error as TestFailure {
            throw TestFailure("\(error.description); stderr so far: \(stderr.text)")
        }
    }

    func stop() {
        if process.isRunning { process.terminate() }
    }

    /// The `homeward` binary: next to the test bundle in the build products directory.
    static func executable() throws -> URL {
        var candidates: [URL] = [
            Bundle.main.bundleURL.appendingPathComponent("homeward"),
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("homeward"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("homeward"),
        ]
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("homeward"))
        }
        // Tests/HomewardClientTests/Support/CLIProcess.swift -> the package root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/homeward"))
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
            return candidate
        }
        throw TestFailure("no homeward executable: build it first (swift build --product homeward); looked in \(candidates.map(\.path))")
    }
}

/// Bytes shared between a reader thread and the test.
final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var all = Data()

    func append(_ chunk: Data) { lock.withLock { all.append(chunk) } }

    var text: String { lock.withLock { String(decoding: all, as: UTF8.self) } }

    /// Appends and returns the complete lines now available.
    func appendAndTakeLines(_ chunk: Data) -> [String] {
        lock.withLock {
            all.append(chunk)
            data.append(chunk)
            var lines: [String] = []
            while let newline = data.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: data[data.startIndex..<newline], as: UTF8.self))
                data = Data(data[data.index(after: newline)...])
            }
            return lines
        }
    }

    func takeRest() -> String? {
        lock.withLock {
            defer { data = Data() }
            return data.isEmpty ? nil : String(decoding: data, as: UTF8.self)
        }
    }
}

/// Runs `homeward` against one relay with its own config directory.
struct CLIHarness: Sendable {
    let relay: LoopbackRelay
    let configDirectory: String

    init(relay: LoopbackRelay) throws {
        self.relay = relay
        configDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
    }

    var environment: [String: String] {
        ["HOMEWARD_CONFIG_DIR": configDirectory, "HOMEWARD_RELAY": "", "HOMEWARD_CA": "", "HOMEWARD_PROFILE": "", "HOMEWARD_PASSWORD": ""]
    }

    /// `--relay` and `--ca` for the loopback relay.
    var connection: [String] { ["--relay", relay.url, "--ca", relay.caPath] }

    func start(_ arguments: [String], stdin: String? = nil, holdStdin: Bool = false) throws -> CLIProcess {
        try CLIProcess(arguments, environment: environment, stdin: stdin, holdStdin: holdStdin)
    }

    /// Runs to completion; returns the exit status, stdout lines and stderr.
    func run(_ arguments: [String], stdin: String? = nil, within seconds: Double = 60) async throws -> CLIResult {
        let process = try start(arguments, stdin: stdin)
        let lines = process.lines
        let collected = try await withTimeout(seconds, "homeward \(arguments.joined(separator: " "))") {
            var all: [String] = []
            for await line in lines { all.append(line) }
            return all
        }
        let status = try await process.exitStatus(within: seconds)
        return CLIResult(arguments: arguments, status: status, lines: collected, stderr: process.stderr)
    }

    func cleanUp() {
        try? FileManager.default.removeItem(atPath: configDirectory)
    }
}

struct CLIResult: Sendable {
    let arguments: [String]
    let status: Int32
    let lines: [String]
    let stderr: String

    var json: [JSONValue] { lines.compactMap { try? JSONParser.parse($0) } }
    var stdout: String { lines.joined(separator: "\n") }

    @discardableResult
    func expectSuccess(file: StaticString = #filePath, line: UInt = #line) -> CLIResult {
        XCTAssertEqual(status, 0, "homeward \(arguments.joined(separator: " ")) failed: \(stderr)\n\(stdout)", file: file, line: line)
        return self
    }
}
