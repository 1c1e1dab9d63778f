#ifndef TESSERA_SYSTEM_SHIM_H
#define TESSERA_SYSTEM_SHIM_H

// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module is not
// built with. The symbols are in every glibc since 2.27.

#include <sys/types.h>
#include <stdint.h>
#include <errno.h>

extern ssize_t copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len, unsigned int flags);

/// copy_file_range(2) from the descriptors' current offsets.
static inline ssize_t tessera_copy_file_range(int input, int output, size_t length) {
    return copy_file_range(input, (off_t *)0, output, (off_t *)0, length, 0);
}

/// copy_file_range(2) between explicit offsets, which it advances.
static inline ssize_t tessera_copy_file_range_at(int input, int64_t *input_offset, int output, int64_t *output_offset,
                                                 size_t length) {
    off_t in = (off_t)*input_offset, out = (off_t)*output_offset;
    ssize_t copied = copy_file_range(input, &in, output, &out, length, 0);
    *input_offset = (int64_t)in;
    *output_offset = (int64_t)out;
    return copied;
}

#ifdef __linux__
#include <fcntl.h>
#include <stdio.h>
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);

/// rename(2) that fails with EEXIST instead of replacing an existing file (RENAME_NOREPLACE);
/// where the file system cannot do that (EINVAL, ENOSYS), -2 so the caller can fall back.
static inline int tessera_rename_noreplace(const char *source, const char *destination) {
    int result = renameat2(AT_FDCWD, source, AT_FDCWD, destination, 1 /* RENAME_NOREPLACE */);
    if (result != 0 && (errno == EINVAL || errno == ENOSYS)) return -2;
    return result;
}

extern int fallocate(int fd, int mode, off_t offset, off_t len);

/// fallocate(2): allocates `length` bytes from `offset` (the file grows to cover them); 0 or -1.
static inline int tessera_fallocate(int descriptor, int64_t offset, int64_t length) {
    return fallocate(descriptor, 0, (off_t)offset, (off_t)length);
}

/// fallocate(2) with FALLOC_FL_KEEP_SIZE: allocates ahead without changing the file's length.
static inline int tessera_fallocate_keep_size(int descriptor, int64_t offset, int64_t length) {
    return fallocate(descriptor, 1 /* FALLOC_FL_KEEP_SIZE */, (off_t)offset, (off_t)length);
}
#endif

#ifdef __GLIBC__
#include <pthread.h>
extern int pthread_setname_np(pthread_t thread, const char *name);

/// Names the calling thread as the system shows it (`top -H`, `perf`; at most 15 bytes kept).
static inline void tessera_name_this_thread(const char *name) {
    char shortened[16];
    snprintf(shortened, sizeof shortened, "%s", name);
    (void)pthread_setname_np(pthread_self(), shortened);
}
#else
static inline void tessera_name_this_thread(const char *name) { (void)name; }
#endif

#ifdef __GLIBC__
#include <malloc.h>
/// Sets glibc's malloc to serve blocks below `mmap_threshold` from its heaps and to give free
/// memory back only beyond `trim_threshold` (mallopt(3)); 1 when both were taken.
static inline int tessera_tune_malloc(int mmap_threshold, int trim_threshold) {
    return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
}
#else
static inline int tessera_tune_malloc(int mmap_threshold, int trim_threshold) { (void)mmap_threshold; (void)trim_threshold; return 0; }
#endif

#ifdef __linux__

// Network monitoring (NetlinkNetworkMonitor): netlink's constants and sockaddr_nl, eventfd(2)
// and gettid(2) are not visible from Swift.

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

/// The multicast groups a route monitor joins: link changes and IPv4/IPv6 address changes.
static inline unsigned int tessera_netlink_route_monitor_groups(void) {
    return RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
}

/// A non-blocking, close-on-exec NETLINK_ROUTE socket bound to the link and address groups,
/// or -1 with errno set.
static inline int tessera_netlink_open_route_monitor(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl address;
    memset(&address, 0, sizeof address);
    address.nl_family = AF_NETLINK;
    address.nl_groups = tessera_netlink_route_monitor_groups();
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/// A non-blocking, close-on-exec eventfd(2) starting at zero, or -1 with errno set.
static inline int tessera_eventfd_open(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/// Adds one to an eventfd's counter, making it readable; 0 or -1 with errno set.
static inline int tessera_eventfd_signal(int fd) {
    return eventfd_write(fd, 1);
}

/// The calling thread's kernel id (its entry under /proc/self/task).
static inline pid_t tessera_gettid(void) {
    return (pid_t)syscall(SYS_gettid);
}

/// Names the calling thread (at most 15 bytes are kept), for ps and debuggers.
static inline void tessera_set_thread_name(const char *name) {
    (void)prctl(PR_SET_NAME, name, 0, 0, 0);
}

// Scheduling classes (sched(7)): SCHED_BATCH and SCHED_RESET_ON_FORK are declared only under
// _GNU_SOURCE; their values are the kernel's ABI.

#include <sched.h>

enum { TESSERA_SCHED_OTHER = 0, TESSERA_SCHED_BATCH = 3, TESSERA_SCHED_RESET_ON_FORK = 0x40000000 };

/// The scheduling policy of thread `tid` (0: the calling thread) without the reset-on-fork flag,
/// or -1 with errno set.
static inline int tessera_scheduling_policy(pid_t tid) {
    int policy = sched_getscheduler(tid);
    return policy < 0 ? -1 : (policy & ~TESSERA_SCHED_RESET_ON_FORK);
}

/// Moves thread `tid` (0: the calling thread) from the default class, SCHED_OTHER, to
/// SCHED_BATCH (same nice value; the reset-on-fork flag kept): 1 when moved, 0 when it runs in
/// another class (one its user chose: left as it is), -1 with errno set when the kernel refused.
static inline int tessera_schedule_as_batch(pid_t tid) {
    int policy = sched_getscheduler(tid);
    if (policy < 0) return -1;
    if ((policy & ~TESSERA_SCHED_RESET_ON_FORK) != TESSERA_SCHED_OTHER) return 0;
    struct sched_param parameters;
    memset(&parameters, 0, sizeof parameters);
    int flags = policy & TESSERA_SCHED_RESET_ON_FORK;
    return sched_setscheduler(tid, TESSERA_SCHED_BATCH | flags, &parameters) == 0 ? 1 : -1;
}

#endif

#ifdef __linux__

// Starting a child process (SpawnedProcess): posix_spawn with the child's standard streams
// set and every other descriptor closed (glibc 2.34's closefrom file action), signals back to
// their defaults and none blocked. Foundation's Process is not used: under AddressSanitizer its
// descriptor scan reads past a buffer, and it was the suspect of crashes beside parallel tests.

#include <spawn.h>
#include <signal.h>

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
extern int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *actions, const char *path);
extern int pipe2(int fds[2], int flags);

/// A pipe whose two ends are closed on exec; 0, or -1 with errno set.
static inline int tessera_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

/// Where a child's standard stream comes from: a descriptor to give it, -1 for /dev/null, -2 to
/// inherit the parent's.
static inline int tessera_spawn_stream(posix_spawn_file_actions_t *actions, int descriptor, int target, int flags) {
    if (descriptor == -2) return 0;
    if (descriptor == -1) return posix_spawn_file_actions_addopen(actions, target, "/dev/null", flags, 0);
    return posix_spawn_file_actions_adddup2(actions, descriptor, target);
}

/// posix_spawn(3) of `path` with `argv` and `envp` (NULL-terminated), its standard input, output
/// and error as `tessera_spawn_stream` takes them, in `directory` (NULL: the parent's); with
/// `new_group`, in a process group of its own (its pid), so that signals a terminal sends to its
/// foreground group (Ctrl-C) do not reach it. 0 and the child's pid, or an errno value.
static inline int tessera_spawn(const char *path, char *const argv[], char *const envp[], int input, int output, int error,
                                const char *directory, int new_group, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) return result;
    result = posix_spawnattr_init(&attributes);
    if (result != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return result;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    if (result == 0) result = tessera_spawn_stream(&actions, input, 0, O_RDONLY);
    if (result == 0) result = tessera_spawn_stream(&actions, output, 1, O_WRONLY);
    if (result == 0) result = tessera_spawn_stream(&actions, error, 2, O_WRONLY);
    if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (result == 0 && directory) result = posix_spawn_file_actions_addchdir_np(&actions, directory);
    if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all);
    if (result == 0 && new_group) result = posix_spawnattr_setpgroup(&attributes, 0);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (new_group ? POSIX_SPAWN_SETPGROUP : 0);
    if (result == 0) result = posix_spawnattr_setflags(&attributes, flags);
    if (result == 0) result = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

#include <malloc.h>

/// The bytes malloc has handed out and not taken back: the main arena's and the mmapped chunks'
/// (mallinfo2(3); other arenas are not counted). For the test helper's measurements.
static inline size_t tessera_heap_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

#endif

#endif
