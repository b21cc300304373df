#ifndef ATS_BUILD_INFO_H
#define ATS_BUILD_INFO_H
/* What the build knew about its source: the version and commit scripts/version computed from
   `git describe`, passed in by `make install` and `scripts/package` through the environment
   (ATS_PROXY_BUILD_VERSION, ATS_PROXY_BUILD_COMMIT; see Package.swift). A plain `swift build`
   passes neither and both functions return "". */

/** The version of this build (e.g. "0.1.0+g1a2b3c4"), or "" when the build was not told. */
const char *ats_build_version(void);

/** The full commit hash of this build, or "" when the build was not told. */
const char *ats_build_commit(void);

#endif
