import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A child process the tool started, stopped when the tool is done.
public final class ManagedProcess: Sendable {
    let process: Process
    /// Signalled once, when the process has exited (`Process.terminationHandler`, set before it runs).
    private let exited: DispatchSemaphore

    init(process: Process, exited: DispatchSemaphore) {
        self.process = process
        self.exited = exited
    }

    public var pid: Int32? { process.isRunning ? process.processIdentifier : nil }

    public static func launch(_ path: String, _ arguments: [String], log: String) throws -> ManagedProcess {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError.failed("\(path) is not an executable; build it first (swift build -c release --product homeward-relay)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        guard FileManager.default.createFile(atPath: log, contents: nil) else {
            throw BenchError.failed("cannot create the log file \(log)")
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        return ManagedProcess(process: process, exited: exited)
    }

    /// SIGTERM, then waits for the exit; a process still running after `grace` seconds (a relay that hangs while
    /// it stops) is killed, so the tool never hangs with it.
    public func terminate(grace: Double = 30) {
        guard process.isRunning else { return }
        process.terminate()
        if exited.wait(timeout: .now() + grace) == .timedOut {
            log("pid \(process.processIdentifier) still running \(grace) s after SIGTERM: killed")
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }
}

/// Runs a shell script to completion; throws with its output if it fails. `system` rather than
/// `Process`: the daemons the script leaves running must not keep the tool waiting.
public func runScript(_ path: String, _ arguments: [String]) throws -> String {
    let logPath = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-bench-script-\(getpid()).log").path
    func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
    let command = (["/bin/bash", path] + arguments).map(quote).joined(separator: " ") + " </dev/null >\(quote(logPath)) 2>&1"
    let status = system(command)
    let output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    try? FileManager.default.removeItem(atPath: logPath)
    guard status == 0 else {
        throw BenchError.failed("\(path) \(arguments.joined(separator: " ")) failed (\(status)):\n\(output)")
    }
    return output
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port`.
public func waitForPort(_ env: BenchEnvironment, port: Int, timeout: Double) async throws {
    let deadline = BenchClock.seconds() + timeout
    while true {
        do {
            let channel = try await ClientBootstrap(group: env.group).connectTimeout(.seconds(1))
                .connect(host: "127.0.0.1", port: port).get()
            try? await channel.close()
            return
        } catch {
            if BenchClock.seconds() > deadline { throw BenchError.failed("nothing listens on 127.0.0.1:\(port) after \(Int(timeout)) s") }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

public enum SystemInfo {
    /// Resident memory of `pid` in bytes (VmRSS).
    public static func residentBytes(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let digits = line.split(separator: " ").compactMap { Int($0) }
            if let kb = digits.first { return kb * 1024 }
        }
        return nil
    }

    /// CPU time (user + system) `pid` has used, in seconds.
    public static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15 (1-based over the whole line).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (user + system) / ticks
    }

    /// CPU time all of `pids` have used together, in seconds; nil if there are none or one is gone.
    public static func cpuSeconds(_ pids: [Int32]) -> Double? {
        guard !pids.isEmpty else { return nil }
        var total = 0.0
        for pid in pids {
            guard let seconds = cpuSeconds(pid) else { return nil }
            total += seconds
        }
        return total
    }

    /// `pid` and its children (PostgreSQL's postmaster and its backends).
    public static func withChildren(_ pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        let children = entries.compactMap(Int32.init).filter { child in
            guard let text = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")") else { return false }
            let fields = text[text.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid  // state, then the parent's pid
        }
        return [pid] + children
    }

    /// Raises this process's open-file limit (children inherit it).
    @discardableResult
    public static func raiseOpenFileLimit(to wanted: UInt64) -> UInt64 {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        var raised = rlimit(rlim_cur: rlim_t(wanted), rlim_max: max(limit.rlim_max, rlim_t(wanted)))
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) != 0 {
            raised = rlimit(rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised)
        }
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return UInt64(limit.rlim_cur)
    }

    /// Cores, kernel and CPU model, for the report.
    public static func machine() -> String {
        var cpu = "unknown CPU"
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
           let colon = line.firstIndex(of: ":") {
            cpu = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var memory = ""
        if let text = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("MemTotal") }),
           let kb = line.split(separator: " ").compactMap({ Int($0) }).first {
            memory = ", \(kb / 1024 / 1024) GiB RAM"
        }
        var name = utsname()
        uname(&name)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        let kernel = "\(field(name.sysname)) \(field(name.release)) \(field(name.machine))"
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(cpu)\(memory), \(kernel)"
    }
}
