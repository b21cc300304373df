#ifndef ATS_TRUST_OVERLAY_H
#define ATS_TRUST_OVERLAY_H

#include <stddef.h>

/// Moves the calling process into a private mount namespace (and, when it is not root or root lacks
/// CAP_SYS_ADMIN, a user namespace that maps its own uid and gid onto themselves) and bind-mounts `bundle` over each of the `count` paths in
/// `targets`, so that the process and its children read `bundle` there. The machine's files are not changed;
/// the mounts vanish with the last process of the namespace.
///
/// Must be called while the process has one thread (a user namespace requires it). Returns 0 on success;
/// otherwise an errno value, and `message` (of `capacity` bytes) names the step that failed.
/// On systems other than Linux it returns ENOSYS.
int ats_trust_overlay_enter(const char *bundle, const char *const *targets, int count, char *message,
                            size_t capacity);

/// Replaces the process image with `file` found on PATH, with `argv` (NULL-terminated). Returns only on
/// failure, with the errno value.
int ats_trust_overlay_exec(const char *file, char *const *argv);

#endif
