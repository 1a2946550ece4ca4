import Foundation

/// Lines from standard input as an async sequence. `readLine` blocks, so it runs on its own
/// thread instead of holding one of the concurrency pool's few threads.
enum LineReader {
    static func standardInput() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .unbounded)
        let thread = Thread {
            while let line = readLine(strippingNewline: true) { continuation.yield(line) }
            continuation.finish()
        }
        thread.name = "homeward.stdin"
        thread.start()
        return stream
    }
}
