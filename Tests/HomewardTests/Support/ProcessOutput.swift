import Foundation

/// Reads a child process's output line by line on a thread of its own, reports the first line that
/// `match` recognises, and keeps draining, so the child never blocks on a full pipe. The stream ends
/// after the match, or without one when the child closes its output (it exited).
func firstMatchingLine<T: Sendable>(of handle: FileHandle, _ match: @escaping @Sendable (String) -> T?) -> AsyncStream<T> {
    let (matches, sink) = AsyncStream<T>.makeStream()
    let thread = Thread {
        var pending = Data()
        var found = false
        while true {
            let data = handle.availableData
            if data.isEmpty { break }
            pending.append(data)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                if !found, let value = match(line) {
                    found = true
                    sink.yield(value)
                    sink.finish()
                }
            }
        }
        sink.finish()
    }
    thread.start()
    return matches
}
