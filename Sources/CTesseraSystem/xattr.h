#ifndef TESSERA_SYSTEM_XATTR_H
#define TESSERA_SYSTEM_XATTR_H

// Extended attributes, which Swift's Glibc module does not export.

#include <sys/types.h>
#include <sys/xattr.h>

static inline int tessera_fsetxattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}

static inline ssize_t tessera_getxattr(const char *path, const char *name, void *value, size_t size) {
    return getxattr(path, name, value, size);
}

#endif
