#ifndef ATS_CNGHTTP2_H
#define ATS_CNGHTTP2_H
#include <nghttp2/nghttp2.h>
#endif
