#define _GNU_SOURCE
#include "ATSPollShims.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

static uint32_t epoll_bits(uint32_t interest, int edge) {
    uint32_t bits = EPOLLRDHUP;
    if (interest & ATS_POLL_IN) bits |= EPOLLIN;
    if (interest & ATS_POLL_OUT) bits |= EPOLLOUT;
    if (edge) bits |= EPOLLET;
    return bits;
}

int ats_poll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int ats_poll_add(int poller, int fd, uint32_t interest, int edge, uint64_t token) {
    struct epoll_event event = {.events = epoll_bits(interest, edge), .data = {.u64 = token}};
    return epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event);
}

int ats_poll_modify(int poller, int fd, uint32_t interest, int edge, uint64_t token) {
    struct epoll_event event = {.events = epoll_bits(interest, edge), .data = {.u64 = token}};
    return epoll_ctl(poller, EPOLL_CTL_MOD, fd, &event);
}

int ats_poll_remove(int poller, int fd) {
    struct epoll_event unused = {0};
    return epoll_ctl(poller, EPOLL_CTL_DEL, fd, &unused);
}

int ats_poll_wait(int poller, ats_poll_event *events, int max, int timeout_ms) {
    struct epoll_event raw[256];
    if (max > 256) max = 256;
    int count = epoll_wait(poller, raw, max, timeout_ms);
    for (int index = 0; index < count; index++) {
        uint32_t bits = raw[index].events, out = 0;
        if (bits & EPOLLIN) out |= ATS_POLL_IN;
        if (bits & EPOLLOUT) out |= ATS_POLL_OUT;
        if (bits & (EPOLLRDHUP | EPOLLHUP)) out |= ATS_POLL_HUP;
        if (bits & EPOLLERR) out |= ATS_POLL_ERR;
        events[index].token = raw[index].data.u64;
        events[index].events = out;
    }
    return count;
}

int ats_wakeup_create(int poller, uint64_t token) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -1;
    struct epoll_event event = {.events = EPOLLIN, .data = {.u64 = token}};
    if (epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int ats_wakeup_signal(int wakeup) {
    uint64_t one = 1;
    ssize_t written;
    do {
        written = write(wakeup, &one, sizeof one);
    } while (written < 0 && errno == EINTR);
    /* EAGAIN means the counter is already huge: the loop is awake anyway. */
    return written == sizeof one || errno == EAGAIN ? 0 : -1;
}

void ats_wakeup_drain(int wakeup) {
    uint64_t value;
    while (read(wakeup, &value, sizeof value) < 0 && errno == EINTR) {
    }
}

void ats_wakeup_close(int wakeup, int poller) {
    (void)poller;
    close(wakeup);
}

int ats_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int ats_tune_allocator(int bytes) {
#if defined(__GLIBC__)
    return mallopt(M_TRIM_THRESHOLD, bytes) == 1 && mallopt(M_MMAP_THRESHOLD, bytes) == 1;
#else
    (void)bytes;
    return 0;
#endif
}

#elif defined(__APPLE__) || defined(__FreeBSD__)
#include <sys/event.h>

/* kqueue keeps one filter per direction; EV_CLEAR gives edge-triggered reports. A filter the
   caller no longer wants is deleted (ENOENT when it was never added is fine). */
static int kq_apply(int poller, int fd, uint32_t interest, int edge, uint64_t token, int adding) {
    struct kevent changes[2];
    uint16_t flags = EV_ADD | EV_ENABLE | (edge ? EV_CLEAR : 0);
    EV_SET(&changes[0], fd, EVFILT_READ, (interest & ATS_POLL_IN) ? flags : EV_DELETE, 0, 0, (void *)(uintptr_t)token);
    EV_SET(&changes[1], fd, EVFILT_WRITE, (interest & ATS_POLL_OUT) ? flags : EV_DELETE, 0, 0, (void *)(uintptr_t)token);
    for (int index = 0; index < 2; index++) {
        if (adding && (changes[index].flags & EV_DELETE)) continue;
        if (kevent(poller, &changes[index], 1, NULL, 0, NULL) != 0 && !(changes[index].flags & EV_DELETE && errno == ENOENT)) {
            return -1;
        }
    }
    return 0;
}

int ats_poll_create(void) {
    int fd = kqueue();
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

int ats_poll_add(int poller, int fd, uint32_t interest, int edge, uint64_t token) {
    return kq_apply(poller, fd, interest, edge, token, 1);
}

int ats_poll_modify(int poller, int fd, uint32_t interest, int edge, uint64_t token) {
    return kq_apply(poller, fd, interest, edge, token, 0);
}

int ats_poll_remove(int poller, int fd) {
    return kq_apply(poller, fd, 0, 0, 0, 0);
}

int ats_poll_wait(int poller, ats_poll_event *events, int max, int timeout_ms) {
    struct kevent raw[256];
    if (max > 256) max = 256;
    struct timespec timeout = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    int count = kevent(poller, NULL, 0, raw, max, timeout_ms < 0 ? NULL : &timeout);
    for (int index = 0; index < count; index++) {
        uint32_t out = 0;
        if (raw[index].flags & EV_ERROR) out |= ATS_POLL_ERR;
        if (raw[index].filter == EVFILT_READ || raw[index].filter == EVFILT_USER) out |= ATS_POLL_IN;
        if (raw[index].filter == EVFILT_WRITE) out |= ATS_POLL_OUT;
        if (raw[index].flags & EV_EOF) out |= ATS_POLL_HUP;
        if ((raw[index].flags & EV_EOF) && raw[index].fflags != 0) out |= ATS_POLL_ERR;
        events[index].token = (uint64_t)(uintptr_t)raw[index].udata;
        events[index].events = out;
    }
    return count;
}

int ats_wakeup_create(int poller, uint64_t token) {
    struct kevent change;
    EV_SET(&change, 1, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0, (void *)(uintptr_t)token);
    return kevent(poller, &change, 1, NULL, 0, NULL) == 0 ? poller : -1;
}

int ats_wakeup_signal(int wakeup) {
    struct kevent change;
    EV_SET(&change, 1, EVFILT_USER, 0, NOTE_TRIGGER, 0, NULL);
    return kevent(wakeup, &change, 1, NULL, 0, NULL);
}

void ats_wakeup_drain(int wakeup) { (void)wakeup; }

void ats_wakeup_close(int wakeup, int poller) {
    (void)wakeup;
    (void)poller;
}

int ats_tune_allocator(int bytes) {
    (void)bytes;
    return 0;
}

int ats_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length) {
    int client = accept(fd, address, length);
    if (client >= 0) {
        fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
        fcntl(client, F_SETFD, FD_CLOEXEC);
    }
    return client;
}
#else
#error "ATSPollShims: no poller for this platform (epoll or kqueue needed)"
#endif

uint64_t ats_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

void ats_set_current_thread_name(const char *name) {
#if defined(__APPLE__)
    pthread_setname_np(name);
#else
    char truncated[16];
    size_t length = 0;
    while (name[length] != 0 && length < sizeof truncated - 1) {
        truncated[length] = name[length];
        length++;
    }
    truncated[length] = 0;
    pthread_setname_np(pthread_self(), truncated);
#endif
}
