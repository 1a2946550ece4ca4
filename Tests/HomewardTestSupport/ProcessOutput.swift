import Foundation
import Logging
import Synchronization

/// Reads a child process's output line by line on a thread of its own, reports the first line that
/// `match` recognises, and keeps draining, so the child never blocks on a full pipe. The stream ends
/// after the match, or without one when the child closes its output (it exited). `log`, when given, gets
/// every line and is ended when the output is.
package func firstMatchingLine<T: Sendable>(of handle: FileHandle, log: ProcessLog? = nil,
                                    _ match: @escaping @Sendable (String) -> T?) -> AsyncStream<T> {
    let (matches, sink) = AsyncStream<T>.makeStream()
    let thread = Thread {
        var pending = Data()
        var found = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            // `read` itself, not `FileHandle.availableData`: that traps on an error, and a read interrupted
            // by a signal (EINTR, e.g. while the test process reaps a child) is one to retry, not a crash.
            let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }
            pending.append(contentsOf: buffer[0..<count])
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                log?.append(line)
                if !found, let value = match(line) {
                    found = true
                    sink.yield(value)
                    sink.finish()
                }
            }
        }
        sink.finish()
        log?.end()
    }
    thread.start()
    return matches
}

/// Every line a child process wrote, kept to look for errors once it has exited.
package final class ProcessLog: Sendable {
    private let state = Mutex<(lines: [String], ended: Bool, waiters: [CheckedContinuation<Void, Never>])>(([], false, []))

    package init() {}

    package func append(_ line: String) {
        state.withLock { $0.lines.append(line) }
    }

    package func end() {
        let waiters = state.withLock { state in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Every line, once the process has closed its output (it exited).
    package var allLines: [String] {
        get async {
            await withCheckedContinuation { continuation in
                let ended = state.withLock { state in
                    if !state.ended { state.waiters.append(continuation) }
                    return state.ended
                }
                if ended { continuation.resume() }
            }
            return state.withLock { $0.lines }
        }
    }

    /// The lines a swift-log `StreamLogHandler` wrote at `level` or above ("TIME LEVEL LABEL: ..."), and at `.error` and
    /// below, SwiftNIO's own complaints ("ERROR: Cannot schedule tasks on an EventLoop that has already shut down").
    package func lines(atLeast level: Logger.Level) async -> [String] {
        await allLines.filter { line in
            if line.hasPrefix("ERROR: ") { return level <= .error }
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, let lineLevel = Logger.Level(rawValue: String(fields[1])) else { return false }
            return lineLevel >= level
        }
    }
}
