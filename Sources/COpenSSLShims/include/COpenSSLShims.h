#ifndef ATS_COPENSSL_SHIMS_H
#define ATS_COPENSSL_SHIMS_H
/* One real C function per OpenSSL function-like macro that Swift cannot import.
   Each shim is named ats_<MACRO> so that grepping the macro finds its shim. */
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/ct.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <stdint.h>

/** OPENSSL_VERSION_NUMBER re-exported as a constant Swift can read. */
static const unsigned long ats_OPENSSL_VERSION_NUMBER = OPENSSL_VERSION_NUMBER;

/* SSL_OP_* use the SSL_OP_BIT cast macro, so they are re-exported as constants. */
static const uint64_t ats_SSL_OP_IGNORE_UNEXPECTED_EOF = SSL_OP_IGNORE_UNEXPECTED_EOF;
static const uint64_t ats_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t ats_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t ats_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t ats_SSL_OP_NO_TICKET = SSL_OP_NO_TICKET;

/** Returns the runtime OpenSSL version string (e.g. "OpenSSL 3.0.19 27 Jan 2026"). */
const char *ats_openssl_version_text(void);

/** The servername callback type of SSL_CTX_set_tlsext_servername_callback. */
typedef int (*ats_servername_cb)(SSL *ssl, int *alert, void *arg);

int ats_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version);
int ats_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version);
long ats_SSL_CTX_set_mode(SSL_CTX *ctx, long mode);
long ats_SSL_set_mode(SSL *ssl, long mode);
long ats_SSL_clear_mode(SSL *ssl, long mode);
long ats_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode);
int ats_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list);
long ats_SSL_CTX_set_dh_auto(SSL_CTX *ctx, int onoff);
int ats_SSL_CTX_set_tlsext_servername_callback(SSL_CTX *ctx, ats_servername_cb cb);
int ats_SSL_CTX_set_tlsext_servername_arg(SSL_CTX *ctx, void *arg);
int ats_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert);
int ats_SSL_add1_chain_cert(SSL *ssl, X509 *cert);
int ats_SSL_set_tlsext_host_name(SSL *ssl, const char *name);
int ats_SSL_set_tlsext_status_type(SSL *ssl, int type);
long ats_SSL_get_tlsext_status_ocsp_resp(SSL *ssl, const unsigned char **resp);
int ats_SSL_get_peer_signature_nid(SSL *ssl, int *nid);
int ats_SSL_get_negotiated_group(SSL *ssl);
int ats_SSL_get_peer_tmp_key(SSL *ssl, EVP_PKEY **key);
long ats_BIO_get_mem_data(BIO *bio, char **data);
void ats_OPENSSL_free(void *ptr);

int ats_sk_X509_num(const STACK_OF(X509) *stack);
X509 *ats_sk_X509_value(const STACK_OF(X509) *stack, int index);
STACK_OF(X509) *ats_sk_X509_new_null(void);
int ats_sk_X509_push(STACK_OF(X509) *stack, X509 *cert);
void ats_sk_X509_pop_free_X509_free(STACK_OF(X509) *stack);
void ats_sk_X509_free(STACK_OF(X509) *stack);
int ats_sk_SCT_num(const STACK_OF(SCT) *stack);
SCT *ats_sk_SCT_value(const STACK_OF(SCT) *stack, int index);
STACK_OF(SCT) *ats_sk_SCT_new_null(void);
int ats_sk_SCT_push(STACK_OF(SCT) *stack, SCT *sct);
int ats_sk_GENERAL_NAME_num(const STACK_OF(GENERAL_NAME) *stack);
GENERAL_NAME *ats_sk_GENERAL_NAME_value(const STACK_OF(GENERAL_NAME) *stack, int index);

/* Extended master secret (RFC 7627): the server-side switch test fixtures use, and whether a finished
   handshake used it (1 yes, 0 no, -1 not known yet). */
static const uint64_t ats_SSL_OP_NO_EXTENDED_MASTER_SECRET = SSL_OP_NO_EXTENDED_MASTER_SECRET;
int ats_SSL_get_extms_support(SSL *ssl);

#endif
