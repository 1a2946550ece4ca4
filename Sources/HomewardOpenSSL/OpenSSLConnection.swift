import CHomewardOpenSSL
import NIOCore

/// One server-side TLS session: an `SSL` between two memory BIOs. NIO writes the client's
/// ciphertext into `inbound`; OpenSSL leaves what it sends in `outbound`, which NIO takes out.
/// Every method reports what OpenSSL did; what to do next is `TLSConnectionStateMachine`'s call.
///
/// Idle memory: an idle connection holds no buffer. `SSL_MODE_RELEASE_BUFFERS` (set on the context)
/// frees OpenSSL's record buffers after most records, but not all: `SSL_read` allocates the 16 KiB read
/// buffer before it finds no ciphertext waiting, and an alert (`close_notify`) keeps the write buffer. So
/// `read` calls `SSL_read` only while ciphertext or decrypted bytes wait, and once the session is open and
/// nothing is in flight, `SSL_free_buffers` frees both. A memory BIO keeps the largest buffer it ever held,
/// so each BIO's buffer is freed whenever it is empty.
final class OpenSSLConnection {
    private let ssl: OpaquePointer
    private let inbound: OpaquePointer
    private let outbound: OpaquePointer

    enum HandshakeResult: Equatable {
        case completed
        case wantsMoreBytes
        case failed(TLSConnectionError)
    }

    enum ReadResult: Equatable {
        /// Every complete record is consumed; more ciphertext is needed.
        case wantsMoreBytes
        /// The peer sent `close_notify`.
        case closeNotify
        case failed(TLSConnectionError)
    }

    init?(context: OpaquePointer) {
        guard let ssl = SSL_new(context) else { return nil }
        guard let inbound = homeward_bio_new_mem(), let outbound = homeward_bio_new_mem() else {
            SSL_free(ssl)
            return nil
        }
        self.ssl = ssl
        self.inbound = inbound
        self.outbound = outbound
        SSL_set_bio(ssl, inbound, outbound)  // the SSL owns both BIOs from here on
        SSL_set_accept_state(ssl)
    }

    deinit { SSL_free(ssl) }

    /// Hands the client's ciphertext to OpenSSL.
    func feed(_ bytes: ByteBuffer) {
        guard bytes.readableBytes > 0 else { return }
        bytes.withUnsafeReadableBytes { raw in
            // A memory BIO takes everything it is given (it grows), so one call suffices.
            _ = BIO_write(inbound, raw.baseAddress, Int32(raw.count))
        }
    }

    func handshake() -> HandshakeResult {
        OpenSSLErrorQueue.clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .completed }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            OpenSSLErrorQueue.clear()
            return .wantsMoreBytes
        default:
            return .failed(.handshakeFailed(reason: OpenSSLErrorQueue.take(or: "the peer's handshake was not TLS")))
        }
    }

    /// Decrypts every complete record into `plaintext`, which grows as needed; starts at the size of the
    /// ciphertext waiting (plaintext is never longer), so an idle connection's reads stay small.
    func read(into plaintext: inout ByteBuffer) -> ReadResult {
        defer { releaseBuffersIfIdle() }
        while homeward_bio_pending(inbound) > 0 || SSL_pending(ssl) > 0 {
            let room = max(homeward_bio_pending(inbound), Int(SSL_pending(ssl)), 512)
            var status: Int32 = 0
            OpenSSLErrorQueue.clear()
            plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { buffer in
                status = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
                return Int(max(status, 0))
            }
            if status > 0 { continue }
            switch SSL_get_error(ssl, status) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                OpenSSLErrorQueue.clear()
                return .wantsMoreBytes
            case SSL_ERROR_ZERO_RETURN:
                OpenSSLErrorQueue.clear()
                return .closeNotify
            default:
                return .failed(.protocolViolation(reason: OpenSSLErrorQueue.take(or: "the peer's record could not be read")))
            }
        }
        return .wantsMoreBytes
    }

    /// Encrypts `bytes` into records. A memory BIO never refuses output, so OpenSSL takes all of it.
    func write(_ bytes: ByteBuffer) -> TLSConnectionError? {
        var remaining = bytes
        while remaining.readableBytes > 0 {
            OpenSSLErrorQueue.clear()
            let written = remaining.withUnsafeReadableBytes { raw in
                SSL_write(ssl, raw.baseAddress, Int32(clamping: raw.count))
            }
            guard written > 0 else {
                return .protocolViolation(reason: OpenSSLErrorQueue.take(or: "SSL_write failed"))
            }
            remaining.moveReaderIndex(forwardBy: Int(written))
        }
        return nil
    }

    /// Queues this side's `close_notify`.
    func sendCloseNotify() {
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(ssl)
        OpenSSLErrorQueue.clear()
    }

    /// What OpenSSL has to send (handshake messages, records, alerts), or nil when nothing.
    func takeOutbound(allocator: ByteBufferAllocator) -> ByteBuffer? {
        let pending = homeward_bio_pending(outbound)
        guard pending > 0 else {
            releaseBuffersIfIdle()
            return nil
        }
        var bytes = allocator.buffer(capacity: pending)
        bytes.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { buffer in
            Int(max(BIO_read(outbound, buffer.baseAddress, Int32(clamping: pending)), 0))
        }
        releaseBuffersIfIdle()
        return bytes
    }

    /// The server name the client asked for (SNI), if any.
    var serverName: String? { homeward_ssl_server_name(ssl).map { String(cString: $0) } }

    /// The protocol chosen by ALPN (`http/1.1`), if the client offered it.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        homeward_ssl_alpn(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// "TLSv1.3" or "TLSv1.2".
    var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// Whether the client resumed a session from a ticket.
    var resumedSession: Bool { SSL_session_reused(ssl) == 1 }

    /// Bytes the two memory BIOs have allocated (held or not): 0 while the connection is idle.
    var bioCapacity: Int { homeward_bio_capacity(inbound) + homeward_bio_capacity(outbound) }

    /// Frees OpenSSL's record buffers now, if it holds any and nothing is in flight (tests measure with it
    /// what an idle session kept).
    func freeRecordBuffers() { _ = SSL_free_buffers(ssl) }

    /// Frees OpenSSL's record buffers and the BIOs' buffers when nothing is in flight. During the
    /// handshake only the BIOs' (OpenSSL keeps its handshake state in its own buffers until it completes).
    private func releaseBuffersIfIdle() {
        guard homeward_bio_pending(inbound) == 0, homeward_bio_pending(outbound) == 0 else { return }
        homeward_bio_release_buffer(inbound)
        homeward_bio_release_buffer(outbound)
        // Refuses (returns 0) while a record is partly read or a write is pending: nothing is freed then.
        if SSL_is_init_finished(ssl) == 1 { _ = SSL_free_buffers(ssl) }
    }
}
