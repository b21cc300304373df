#define _GNU_SOURCE
#include "COpenSSLShims.h"

const char *ats_openssl_version_text(void) { return OpenSSL_version(OPENSSL_VERSION); }
