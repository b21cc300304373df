#define _GNU_SOURCE
#include "COpenSSLShims.h"

const char *ats_openssl_version_text(void) { return OpenSSL_version(OPENSSL_VERSION); }

int ats_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) { return (int)SSL_CTX_set_min_proto_version(ctx, version); }
int ats_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) { return (int)SSL_CTX_set_max_proto_version(ctx, version); }
long ats_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
long ats_SSL_set_mode(SSL *ssl, long mode) { return SSL_set_mode(ssl, mode); }
long ats_SSL_clear_mode(SSL *ssl, long mode) { return SSL_clear_mode(ssl, mode); }
long ats_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_session_cache_mode(ctx, mode); }
long ats_SSL_CTX_set_dh_auto(SSL_CTX *ctx, int onoff) { return SSL_CTX_set_dh_auto(ctx, onoff); }
int ats_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) { return (int)SSL_CTX_set1_groups_list(ctx, list); }
int ats_SSL_CTX_set_tlsext_servername_callback(SSL_CTX *ctx, ats_servername_cb cb) {
    return (int)SSL_CTX_set_tlsext_servername_callback(ctx, cb);
}
int ats_SSL_CTX_set_tlsext_servername_arg(SSL_CTX *ctx, void *arg) { return (int)SSL_CTX_set_tlsext_servername_arg(ctx, arg); }
int ats_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert) { return (int)SSL_CTX_add1_chain_cert(ctx, cert); }
int ats_SSL_add1_chain_cert(SSL *ssl, X509 *cert) { return (int)SSL_add1_chain_cert(ssl, cert); }
int ats_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
int ats_SSL_set_tlsext_status_type(SSL *ssl, int type) { return (int)SSL_set_tlsext_status_type(ssl, type); }
long ats_SSL_get_tlsext_status_ocsp_resp(SSL *ssl, const unsigned char **resp) {
    return SSL_get_tlsext_status_ocsp_resp(ssl, resp);
}
int ats_SSL_get_peer_signature_nid(SSL *ssl, int *nid) { return (int)SSL_get_peer_signature_nid(ssl, nid); }
int ats_SSL_get_negotiated_group(SSL *ssl) { return (int)SSL_get_negotiated_group(ssl); }
int ats_SSL_get_peer_tmp_key(SSL *ssl, EVP_PKEY **key) { return (int)SSL_get_peer_tmp_key(ssl, key); }
long ats_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
void ats_OPENSSL_free(void *ptr) { OPENSSL_free(ptr); }

int ats_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
X509 *ats_sk_X509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }
STACK_OF(X509) *ats_sk_X509_new_null(void) { return sk_X509_new_null(); }
int ats_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
void ats_sk_X509_pop_free_X509_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }
void ats_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
int ats_sk_SCT_num(const STACK_OF(SCT) *stack) { return sk_SCT_num(stack); }
SCT *ats_sk_SCT_value(const STACK_OF(SCT) *stack, int index) { return sk_SCT_value(stack, index); }
STACK_OF(SCT) *ats_sk_SCT_new_null(void) { return sk_SCT_new_null(); }
int ats_sk_SCT_push(STACK_OF(SCT) *stack, SCT *sct) { return sk_SCT_push(stack, sct); }
int ats_sk_GENERAL_NAME_num(const STACK_OF(GENERAL_NAME) *stack) { return sk_GENERAL_NAME_num(stack); }
GENERAL_NAME *ats_sk_GENERAL_NAME_value(const STACK_OF(GENERAL_NAME) *stack, int index) {
    return sk_GENERAL_NAME_value(stack, index);
}
int ats_SSL_get_extms_support(SSL *ssl) { return (int)SSL_get_extms_support(ssl); }
