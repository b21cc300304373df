#define _GNU_SOURCE
#include "process_spawn.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

int ats_process_spawn(
    pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *directory, int in, int out,
    int err) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int status = posix_spawn_file_actions_init(&actions);
    if (status != 0) return status;
    status = posix_spawnattr_init(&attributes);
    if (status != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return status;
    }
    // The child starts with no signal blocked and every signal at its default action: a parent that blocks or
    // ignores SIGTERM/SIGINT (for a Dispatch signal source, or a test runner) must not pass that on.
    short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    status = posix_spawnattr_setsigmask(&attributes, &none);
    if (status == 0) status = posix_spawnattr_setsigdefault(&attributes, &all);
    const int sources[3] = {in, out, err};
    for (int target = 0; target < 3 && status == 0; target++) {
        if (sources[target] >= 0) {
            status = posix_spawn_file_actions_adddup2(&actions, sources[target], target);
        }
#if defined(__APPLE__)
        else {
            status = posix_spawn_file_actions_addinherit_np(&actions, target);
        }
#endif
    }
#if defined(__APPLE__)
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#else
    if (status == 0) status = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
    if (status == 0 && directory != NULL) status = posix_spawn_file_actions_addchdir_np(&actions, directory);
    if (status == 0) status = posix_spawnattr_setflags(&attributes, flags);
    if (status == 0) status = posix_spawnattr_setpgroup(&attributes, 0);
    if (status == 0) status = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return status;
}
