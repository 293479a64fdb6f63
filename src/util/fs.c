/* fs: file reading, atomic publishing, directory helpers. */
#define _GNU_SOURCE
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tc_read_file_at(int dirfd, const char *name, int nofollow, char **data, size_t *len)
{
    int flags = O_RDONLY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0);
    int fd = openat(dirfd, name, flags);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = S_ISREG(st.st_mode) ? errno : EINVAL;
        close(fd);
        errno = e;
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        if (n + 1 >= cap) { /* file grew while reading */
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                close(fd);
                errno = ENOMEM;
                return -1;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int tc_read_file(const char *path, int nofollow, char **data, size_t *len)
{
    return tc_read_file_at(AT_FDCWD, path, nofollow, data, len);
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int tc_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    if (write_all(fd, data, len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

int tc_write_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
    /* The temporary lives next to its destination so the rename is atomic;
     * the ".tmp." prefix lets a later cleanup find what a killed writer
     * left behind. */
    static unsigned long counter;
    size_t nl = strlen(name);
    char *tmp = malloc(nl + 64);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long salt = (unsigned long)ts.tv_nsec ^ __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(tmp, nl + 64, ".tmp.%ld.%lx.%s", (long)getpid(), salt, name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        errno = e;
        return -1;
    }
    int rc = write_all(fd, data, len);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0)
        unlinkat(dirfd, tmp, 0);
    free(tmp);
    errno = e;
    return rc;
}

int tc_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return tc_write_atomic_at(AT_FDCWD, path, data, len, mode);
    char *dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    free(dir);
    if (dfd < 0) {
        errno = e;
        return -1;
    }
    int rc = tc_write_atomic_at(dfd, slash + 1, data, len, mode);
    e = errno;
    close(dfd);
    errno = e;
    return rc;
}

int tc_mkdir_p(const char *path, mode_t mode)
{
    char *p = strdup(path);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            errno = e;
            return -1;
        }
        *s = '/';
    }
    int rc = 0;
    if (mkdir(p, mode) != 0) {
        struct stat st;
        if (errno != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            if (errno == EEXIST)
                errno = ENOTDIR;
            rc = -1;
        }
    }
    int e = errno;
    free(p);
    errno = e;
    return rc;
}

int tc_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *child = tc_path_join(path, de->d_name);
        if (!child || tc_remove_tree(child) != 0)
            rc = -1;
        free(child);
    }
    closedir(d);
    if (rmdir(path) != 0)
        rc = -1;
    return rc;
}

char *tc_make_temp_dir(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    size_t n = strlen(tmp) + strlen(prefix) + 16;
    char *p = malloc(n);
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    snprintf(p, n, "%s/%s.XXXXXX", tmp, prefix);
    if (!mkdtemp(p)) {
        int e = errno;
        free(p);
        errno = e;
        return NULL;
    }
    return p;
}

char *tc_path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p)
        return NULL;
    memcpy(p, a, la);
    size_t n = la;
    if (n && p[n - 1] != '/')
        p[n++] = '/';
    memcpy(p + n, b, lb + 1);
    return p;
}
