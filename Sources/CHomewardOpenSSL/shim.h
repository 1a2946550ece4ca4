// The system's libssl (Debian libssl-dev) for HomewardOpenSSL. OpenSSL spells much of its API as
// function-like macros (SSL_CTX_set_mode, SSL_CTX_set_min_proto_version, ...) and option bits that
// Swift cannot import; the static inline functions below give them a callable shape.
#ifndef HOMEWARD_OPENSSL_SHIM_H
#define HOMEWARD_OPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <malloc.h>
#include <string.h>

// Chooses "http/1.1" when the client offers it; a client offering only other protocols gets no ALPN
// answer (the handshake goes on) rather than a fatal alert, as servers without ALPN behave.
static int homeward_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    (void)arg;
    static const unsigned char http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, http11, sizeof(http11), in, inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/// A server context's fixed policy: TLS 1.2 and 1.3 only; forward-secret AEAD suites for 1.2; no
/// renegotiation, no compression; stateless session tickets (one per TLS 1.3 handshake) and no
/// server-side session cache; OpenSSL's record buffers freed whenever a connection is idle.
/// Returns 1 on success, 0 when OpenSSL refused a setting (its error queue says which).
static inline int homeward_ssl_ctx_configure_server(SSL_CTX *ctx) {
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return 0;
    if (SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) return 0;
    uint64_t options = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE;
    SSL_CTX_set_options(ctx, options);
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_set_num_tickets(ctx, 1) != 1) return 0;
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) return 0;
    if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1) return 0;
    if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) return 0;
    SSL_CTX_set_alpn_select_cb(ctx, homeward_alpn_select, NULL);
    return 1;
}

/// A memory BIO whose reads report "retry" when empty (more ciphertext may come), not end of file.
static inline BIO *homeward_bio_new_mem(void) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio != NULL) BIO_set_mem_eof_return(bio, -1);
    return bio;
}

static inline size_t homeward_bio_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}

/// Bytes in use in the calling thread's main malloc arena (glibc's mallinfo2), for the tests that check
/// what an idle session holds.
static inline size_t homeward_heap_bytes_in_use(void) {
    return mallinfo2().uordblks;
}

/// The size of the buffer a memory BIO has allocated (0 when none).
static inline size_t homeward_bio_capacity(BIO *bio) {
    BUF_MEM *held = NULL;
    if (BIO_get_mem_ptr(bio, &held) <= 0 || held == NULL) return 0;
    return held->max;
}

/// Frees an empty memory BIO's buffer (a memory BIO keeps the largest buffer it ever held) by giving it a
/// new, unallocated one; does nothing while the BIO holds bytes or has no buffer.
static inline void homeward_bio_release_buffer(BIO *bio) {
    BUF_MEM *held = NULL;
    if (BIO_ctrl_pending(bio) != 0 || BIO_get_mem_ptr(bio, &held) <= 0 || held == NULL || held->max == 0) return;
    BUF_MEM *empty = BUF_MEM_new();
    if (empty == NULL) return;
    BIO_set_mem_buf(bio, empty, BIO_CLOSE);  // frees the one it held
}

/// The server name the client sent (SNI), or NULL.
static inline const char *homeward_ssl_server_name(const SSL *ssl) {
    return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
}

/// The negotiated ALPN protocol, or length 0 when none was.
static inline void homeward_ssl_alpn(const SSL *ssl, const unsigned char **data, unsigned int *length) {
    SSL_get0_alpn_selected(ssl, data, length);
}

/// The oldest error on this thread's OpenSSL error queue as text (and clears the queue), or 0 when empty.
static inline unsigned long homeward_take_error(char *buffer, size_t length) {
    unsigned long first = ERR_get_error();
    if (first != 0) ERR_error_string_n(first, buffer, length);
    ERR_clear_error();
    return first;
}

#endif
