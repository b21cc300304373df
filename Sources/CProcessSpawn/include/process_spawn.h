#ifndef ATS_PROCESS_SPAWN_H
#define ATS_PROCESS_SPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` through posix_spawn, in a process group of its own, with
/// descriptor `in`, `out` and `err` as its standard input, output and error (a negative value keeps
/// the parent's), every other descriptor closed, and `directory` (when not NULL) as its working
/// directory. Stores the child's PID in `pid`. Returns 0, or the errno value posix_spawn reported.
///
/// Foundation's `Process.run()` on Linux finds the descriptors to close by reading /proc/self/fd
/// with a copy that reads past short directory entries, which crashes about one run in twenty of a
/// suite that starts many children (swift-corelibs-foundation#5472); this closes them with
/// `posix_spawn_file_actions_addclosefrom_np` instead.
int ats_process_spawn(
    pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *directory, int in, int out,
    int err);

#endif
