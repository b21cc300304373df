#ifndef CLOADGENSSL_H
#define CLOADGENSSL_H
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* Function-like OpenSSL macros Swift cannot import, as static inline wrappers. */
static inline long loadgen_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline long loadgen_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long loadgen_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline long loadgen_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
#endif
