import Logging
import Synchronization

/// Keeps every log line (message and metadata) a logger writes, to look for warnings and leaks.
package final class LogRecorder: Sendable {
    private let entries = Mutex<[(Logger.Level, String)]>([])

    package init() {}

    package var logger: Logger {
        var logger = Logger(label: "homeward.test") { _ in Handler(recorder: self) }
        logger.logLevel = .trace
        return logger
    }

    /// Every line at `level` or above.
    package func lines(at level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.0 >= level }.map(\.1) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let text = "\(event.message) " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            recorder.entries.withLock { $0.append((event.level, text)) }
        }
    }
}
