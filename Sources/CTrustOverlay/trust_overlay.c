// The one piece of `ats-proxy exec` that must run between fork and exec of the command: entering a private
// mount namespace and bind-mounting the CA bundle over the system bundle. Swift cannot do this safely in a
// multi-threaded process, so a fresh single-threaded ats-proxy process calls it and then execs the command.
#define _GNU_SOURCE
#include "trust_overlay.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>

/// Writes `text` to the /proc file `path`; 0 or an errno value.
static int write_proc_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t length = strlen(text);
    ssize_t written = write(fd, text, length);
    int saved = errno;
    close(fd);
    if (written != (ssize_t)length) return written < 0 ? saved : EIO;
    return 0;
}

int ats_trust_overlay_enter(const char *bundle, const char *const *targets, int count, char *message,
                            size_t capacity) {
    uid_t uid = geteuid();
    gid_t gid = getegid();
    // Root needs only a mount namespace; without CAP_SYS_ADMIN (a container) a user namespace may still do.
    int withUser = uid != 0;
    int result = unshare(withUser ? CLONE_NEWUSER | CLONE_NEWNS : CLONE_NEWNS);
    if (result != 0 && !withUser && errno == EPERM) {
        withUser = 1;
        result = unshare(CLONE_NEWUSER | CLONE_NEWNS);
    }
    if (result != 0) {
        int error = errno;
        snprintf(message, capacity, "unshare(%s): %s", withUser ? "CLONE_NEWUSER|CLONE_NEWNS" : "CLONE_NEWNS",
                 strerror(error));
        return error;
    }
    if (withUser) {
        char map[64];
        int error = write_proc_file("/proc/self/setgroups", "deny");
        if (error == 0) {
            snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
            error = write_proc_file("/proc/self/uid_map", map);
        }
        if (error == 0) {
            snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
            error = write_proc_file("/proc/self/gid_map", map);
        }
        if (error != 0) {
            snprintf(message, capacity, "mapping uid %u and gid %u in the user namespace: %s", (unsigned)uid,
                     (unsigned)gid, strerror(error));
            return error;
        }
    }
    // Keep the bind mounts from propagating back to the machine's mount namespace.
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        int error = errno;
        snprintf(message, capacity, "making / private in the new mount namespace: %s", strerror(error));
        return error;
    }
    for (int index = 0; index < count; index++) {
        if (mount(bundle, targets[index], NULL, MS_BIND, NULL) != 0) {
            int error = errno;
            snprintf(message, capacity, "bind-mounting %s over %s: %s", bundle, targets[index], strerror(error));
            return error;
        }
    }
    return 0;
}

#else

int ats_trust_overlay_enter(const char *bundle, const char *const *targets, int count, char *message,
                            size_t capacity) {
    (void)bundle;
    (void)targets;
    (void)count;
    snprintf(message, capacity, "private mount namespaces exist only on Linux");
    return ENOSYS;
}

#endif

int ats_trust_overlay_exec(const char *file, char *const *argv) {
    execvp(file, argv);
    return errno;
}
