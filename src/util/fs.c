/* fs: file reading, atomic publishing, output files, directory helpers. */
#define _GNU_SOURCE
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A file that grows while it is read is read up to max + 1 bytes and
 * refused. */
int tc_read_fd(int fd, size_t max, char **data, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    if ((uint64_t)st.st_size > (uint64_t)max) {
        errno = EFBIG;
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        if (n + 1 >= cap) { /* the file grew while it was read */
            size_t more = cap > max / 2 ? max + 2 : cap * 2;
            char *p = more > cap ? realloc(buf, more) : NULL;
            if (!p) {
                free(buf);
                errno = more > cap ? ENOMEM : EFBIG;
                return -1;
            }
            buf = p;
            cap = more;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            free(buf);
            errno = EFBIG;
            return -1;
        }
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int tc_read_file_at(int dirfd, const char *name, size_t max, char **data, size_t *len)
{
    /* O_NONBLOCK: a FIFO planted here must not stop the build in open() */
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    int rc = tc_read_fd(fd, max, data, len);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int tc_read_file(const char *path, int nofollow, char **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0)
        return -1;
    int rc = tc_read_fd(fd, (size_t)-2, data, len);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int tc_write_all(int fd, const void *data, size_t len)
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
    if (tc_write_all(fd, data, len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

int tc_write_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                       int exact_mode)
{
    /* The temporary lives next to its destination so the rename is atomic;
     * the ".tmp." prefix lets a later cleanup find what a killed writer
     * left behind. Only as much of the name as fits NAME_MAX goes into it:
     * the pid and the salt make it unique. */
    static unsigned long counter;
    char tmp[NAME_MAX + 1];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long salt = (unsigned long)ts.tv_nsec ^ __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int head = snprintf(tmp, sizeof tmp, ".tmp.%ld.%lx.", (long)getpid(), salt);
    snprintf(tmp + head, sizeof tmp - (size_t)head, "%s", name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    int rc = exact_mode ? fchmod(fd, mode) : 0;
    if (rc == 0)
        rc = tc_write_all(fd, data, len);
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
    errno = e;
    return rc;
}

/* tc_write_atomic, with the mode exactly as given (not under the umask)
 * when exact_mode. */
static int write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                        int exact_mode)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return tc_write_atomic_at(AT_FDCWD, path, data, len, mode, exact_mode);
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
    int rc = tc_write_atomic_at(dfd, slash + 1, data, len, mode, exact_mode);
    e = errno;
    close(dfd);
    errno = e;
    return rc;
}

int tc_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    return write_atomic(path, data, len, mode, 0);
}

/* Truncates and writes a file that exists (or that a dangling link
 * names): devices, FIFOs, files with several names. */
static int write_in_place(const char *path, int create, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
    if (fd < 0)
        return -1;
    int rc = tc_write_all(fd, data, len);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    errno = e;
    return rc;
}

/* When the file at path is still the regular file st describes and holds
 * exactly the len bytes at data, gives it the current time: 1. Else 0 (the
 * caller writes it). Opened without blocking, in case something else was
 * put there meanwhile. */
static int touch_if_holds(const char *path, const struct stat *st, const void *data, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return 0;
    struct stat now;
    char *old = NULL;
    size_t n = 0;
    int same = fstat(fd, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino &&
               tc_read_fd(fd, len, &old, &n) == 0 && n == len && memcmp(old, data, len) == 0 &&
               futimens(fd, NULL) == 0;
    free(old);
    close(fd);
    return same;
}

/* Whether path names a descriptor of this process (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N): a link to the file the caller holds open. Replacing
 * that file would leave the caller's descriptor on the old, empty one. */
static int names_a_descriptor(const char *path)
{
    return !strncmp(path, "/dev/fd/", 8) || !strcmp(path, "/dev/stdout") ||
           !strcmp(path, "/dev/stderr") || (!strncmp(path, "/proc/", 6) && strstr(path, "/fd/"));
}

int tc_write_output(const char *path, const void *data, size_t len)
{
    struct stat st, ls;
    int exists = stat(path, &st) == 0;
    int link = lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode);
    /* A build repeated into the file it made: the bytes are there, and only
     * the time changes, as a rewrite would change it (make then sees the
     * output made). Replacing the file would cost more than the rest of a
     * warm build's writing: ext4 allocates a new file's blocks when it is
     * renamed over an old one (3.6 ms of an 18 ms warm build of the
     * 250-kernel module on the 2-core machine). */
    if (exists && S_ISREG(st.st_mode) && (size_t)st.st_size == len && access(path, W_OK) == 0 &&
        touch_if_holds(path, &st, data, len))
        return 0;
    if (exists && (!S_ISREG(st.st_mode) || st.st_nlink > 1))
        return write_in_place(path, 0, data, len);
    if (link && !exists)
        return errno == ENOENT ? write_in_place(path, 1, data, len) : -1;
    /* As a compiler's open(O_TRUNC): a file we may not write stays as it
     * is, one we replace keeps its permissions, a new one gets 0666 less
     * the umask. */
    if (exists && access(path, W_OK) != 0)
        return -1;
    if (link && exists && names_a_descriptor(path))
        return write_in_place(path, 0, data, len); /* as ptxas writes it */
    mode_t mode = exists ? st.st_mode & 07777 : 0666;
    if (!link)
        return write_atomic(path, data, len, mode, exists);
    /* a link to a regular file: replace that file, keep the link */
    char *real = realpath(path, NULL);
    if (!real)
        return -1;
    int rc = write_atomic(real, data, len, mode, exists);
    int e = errno;
    free(real);
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

/* Empties the directory dfd (which it closes), depth levels at most. */
static int empty_dir(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (tc_remove_tree_at(dirfd(d), de->d_name, depth) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

int tc_remove_tree_at(int dirfd, const char *name, int max_depth)
{
    /* Unlinking first removes files, links and special files at once;
     * only a directory is opened, by its descriptor, so a directory
     * swapped for a link meanwhile is never entered. */
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    if (max_depth <= 0) {
        errno = ELOOP;
        return -1;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    int rc = empty_dir(fd, max_depth - 1);
    /* swapped for a link or file meanwhile: that goes, the directory is
     * wherever it was moved to */
    if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT &&
        !(errno == ENOTDIR && unlinkat(dirfd, name, 0) == 0))
        rc = -1;
    return rc;
}

int tc_remove_tree(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (dfd < 0)
        return -1;
    int rc = tc_remove_tree_at(dfd, slash ? slash + 1 : path, 64);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

const char *tc_temp_root(void)
{
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

char *tc_make_temp_dir(const char *prefix)
{
    const char *tmp = tc_temp_root();
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
