import Foundation

/// Reads a child process's output line by line on its own thread until the pipe closes, so that the
/// child never blocks on a full pipe; `onLine` sees every line (RelayProcess, PostgresServer).
enum OutputLines {
    static func watch(_ handle: FileHandle, onLine: @escaping @Sendable (String) -> Void,
                      onEnd: @escaping @Sendable () -> Void = {}) {
        let thread = Thread {
            var pending = Data()
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending.append(data)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    onLine(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
            onEnd()
        }
        thread.start()
    }
}
