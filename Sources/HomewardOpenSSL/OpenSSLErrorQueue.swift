import CHomewardOpenSSL

/// OpenSSL's per-thread error queue. Every call into libssl starts with an empty queue (so that
/// `SSL_get_error` reports this call's failure, not an older one on this event loop thread) and
/// leaves it empty.
enum OpenSSLErrorQueue {
    static func clear() { ERR_clear_error() }

    /// The oldest queued error as OpenSSL's text, or `fallback` when the queue is empty; empties the queue.
    static func take(or fallback: String) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let code = buffer.withUnsafeMutableBufferPointer { homeward_take_error($0.baseAddress, $0.count) }
        guard code != 0 else { return fallback }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
