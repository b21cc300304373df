#ifndef ATS_COPENSSL_SHIMS_H
#define ATS_COPENSSL_SHIMS_H
/* One real C function per OpenSSL function-like macro that Swift cannot import.
   Each shim is named ats_<MACRO> so that grepping the macro finds its shim. */
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/ct.h>
#include <stdint.h>

/** OPENSSL_VERSION_NUMBER re-exported as a constant Swift can read. */
static const unsigned long ats_OPENSSL_VERSION_NUMBER = OPENSSL_VERSION_NUMBER;

/** Returns the runtime OpenSSL version string (e.g. "OpenSSL 3.0.19 27 Jan 2026"). */
const char *ats_openssl_version_text(void);

#endif
