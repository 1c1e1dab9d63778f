#ifndef TESSERA_SYSTEM_SHIM_H
#define TESSERA_SYSTEM_SHIM_H

// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module is not
// built with. The symbols are in every glibc since 2.27.

#include <sys/types.h>
#include <stdint.h>

extern ssize_t copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len, unsigned int flags);

/// copy_file_range(2) from the descriptors' current offsets.
static inline ssize_t tessera_copy_file_range(int input, int output, size_t length) {
    return copy_file_range(input, (off_t *)0, output, (off_t *)0, length, 0);
}

#endif
