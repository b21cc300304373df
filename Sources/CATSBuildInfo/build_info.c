#include "CATSBuildInfo.h"

#ifndef ATS_PROXY_BUILD_VERSION
#define ATS_PROXY_BUILD_VERSION ""
#endif
#ifndef ATS_PROXY_BUILD_COMMIT
#define ATS_PROXY_BUILD_COMMIT ""
#endif

const char *ats_build_version(void) { return ATS_PROXY_BUILD_VERSION; }
const char *ats_build_commit(void) { return ATS_PROXY_BUILD_COMMIT; }
