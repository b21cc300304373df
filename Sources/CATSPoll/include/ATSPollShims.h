#ifndef ATS_POLL_SHIMS_H
#define ATS_POLL_SHIMS_H
/* The readiness poller behind ATSProxyIO's event loops: epoll on Linux, kqueue on Darwin, behind
   one small interface (epoll's packed struct and kqueue's EV_SET macro do not import into Swift).
   It is a C target of its own (CATSPoll), apart from the OpenSSL shims, so the socket code sees
   no OpenSSL headers; poll.c defines _GNU_SOURCE (accept4, pthread_setname_np, mallopt).
   Every call is a thin wrapper; errors are returned as -1 with errno set. */
#include <stdint.h>
#include <sys/socket.h>

/** Readiness bits reported by ats_poll_wait and requested by ats_poll_add/modify. */
enum {
    ATS_POLL_IN = 1,     /* readable (or a pending accept) */
    ATS_POLL_OUT = 2,    /* writable (or a non-blocking connect finished) */
    ATS_POLL_HUP = 4,    /* the peer shut down its write side, or both directions closed */
    ATS_POLL_ERR = 8     /* a socket error is pending (SO_ERROR) */
};

/** One readiness report: the token given at registration and the ATS_POLL_* bits. */
typedef struct {
    uint64_t token;
    uint32_t events;
} ats_poll_event;

/** A new poller (close-on-exec); -1 on error. */
int ats_poll_create(void);
/** Watches `fd` for `interest` (ATS_POLL_IN|OUT); `edge` != 0 reports each change once
    (EPOLLET / EV_CLEAR) instead of for as long as the condition holds. HUP and ERR are always
    reported. */
int ats_poll_add(int poller, int fd, uint32_t interest, int edge, uint64_t token);
/** Changes what `fd` is watched for. */
int ats_poll_modify(int poller, int fd, uint32_t interest, int edge, uint64_t token);
/** Stops watching `fd` (closing the fd also does, for a fd that was never duplicated). */
int ats_poll_remove(int poller, int fd);
/** Waits at most `timeout_ms` (-1: no limit) and fills at most `max` reports; returns how many,
    0 on timeout, -1 on error (EINTR included). */
int ats_poll_wait(int poller, ats_poll_event *events, int max, int timeout_ms);

/** A wakeup channel for other threads, registered in `poller` with `token` (level-triggered).
    Returns a descriptor to pass to ats_wakeup_signal/drain (an eventfd on Linux; on Darwin an
    EVFILT_USER event on the poller itself, and the return value is the poller). */
int ats_wakeup_create(int poller, uint64_t token);
/** Makes the wakeup channel readable; safe from any thread. */
int ats_wakeup_signal(int wakeup);
/** Resets the wakeup channel after it was reported. */
void ats_wakeup_drain(int wakeup);
/** Closes a wakeup channel made by ats_wakeup_create (nothing to do on Darwin). */
void ats_wakeup_close(int wakeup, int poller);

/** accept4(SOCK_NONBLOCK | SOCK_CLOEXEC) where available, else accept + fcntl. */
int ats_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length);

/** glibc malloc: keep up to `bytes` of freed memory instead of returning it to the kernel, and
    serve requests below `bytes` from the heap instead of fresh mmaps (mallopt M_TRIM_THRESHOLD and
    M_MMAP_THRESHOLD). Returns 1 when applied, 0 where there is nothing to tune. */
int ats_tune_allocator(int bytes);

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t ats_monotonic_nanoseconds(void);

/** Names the calling thread (as seen in top, perf and /proc/PID/task/N/comm; Linux keeps the first
    15 bytes). pthread_setname_np needs _GNU_SOURCE, which Swift's Glibc module lacks. */
void ats_set_current_thread_name(const char *name);
#endif
