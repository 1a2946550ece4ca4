import CHomewardOpenSSL

/// A server `SSL_CTX` on the system's libssl: the certificate chain and key from PEM files and the
/// relay's fixed policy (TLS 1.2 and 1.3, forward-secret AEAD suites, ALPN `http/1.1`, no
/// renegotiation or compression, stateless session tickets, record buffers released while idle).
///
/// `@unchecked Sendable`: the context is configured completely in `init` and never changed after;
/// OpenSSL documents `SSL_new` on a shared, no longer modified `SSL_CTX` as safe from any thread
/// (its reference count is atomic). The pointer is private, so the compiler checks that
/// `makeConnection` is its only use after `init`: nothing can change the context once it is shared.
public final class OpenSSLServerContext: @unchecked Sendable {
    private let context: OpaquePointer

    /// - Throws: `OpenSSLSetupError` with OpenSSL's reason.
    public init(certificateChainPath: String, privateKeyPath: String) throws {
        OpenSSLErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw OpenSSLSetupError.context(reason: OpenSSLErrorQueue.take(or: "SSL_CTX_new failed"))
        }
        self.context = context
        guard homeward_ssl_ctx_configure_server(context) == 1 else {
            throw OpenSSLSetupError.context(reason: OpenSSLErrorQueue.take(or: "a setting was refused"))
        }
        guard SSL_CTX_use_certificate_chain_file(context, certificateChainPath) == 1 else {
            throw OpenSSLSetupError.certificateChain(
                path: certificateChainPath, reason: OpenSSLErrorQueue.take(or: "no certificate"))
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyPath, SSL_FILETYPE_PEM) == 1 else {
            throw OpenSSLSetupError.privateKey(path: privateKeyPath, reason: OpenSSLErrorQueue.take(or: "no key"))
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw OpenSSLSetupError.keyDoesNotMatchCertificate(reason: OpenSSLErrorQueue.take(or: "mismatch"))
        }
        OpenSSLErrorQueue.clear()
    }

    deinit { SSL_CTX_free(context) }

    /// The library's own version text, e.g. "OpenSSL 3.0.17 1 Jul 2025" (what Debian's updates change).
    public static var libraryVersion: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }

    /// A new server-side session for one connection, or nil when OpenSSL is out of memory.
    func makeConnection() -> OpenSSLConnection? { OpenSSLConnection(context: context) }
}
