/* fs: the one place that reads and writes files. Writes that others may
 * read concurrently always go through tc_write_atomic (temporary file in the
 * same directory, then rename), so a reader sees the old file, the new
 * file, or nothing; never a partial one. Reads of files others may have
 * put there never block (a FIFO is refused, not opened for good) and are
 * bounded. */
#ifndef TC_FS_H
#define TC_FS_H

#include <stddef.h>
#include <sys/types.h>

/* Reads a whole file into malloc'd memory (NUL-terminated for convenience).
 * nofollow: refuse to open a symbolic link. Returns 0, or -1 with errno. */
int tc_read_file(const char *path, int nofollow, char **data, size_t *len);

/* Reads the whole of the open regular file fd (EINVAL for anything else),
 * when it holds at most max bytes (EFBIG otherwise, found from its size
 * before reading). 0, or -1 with errno. */
int tc_read_fd(int fd, size_t max, char **data, size_t *len);

/* Reads the regular file name in the directory dirfd, never following a
 * link and never blocking on a FIFO or a device (EINVAL: not a regular
 * file), and only when it holds at most max bytes (EFBIG otherwise, found
 * before reading: a 5 GB sparse file costs nothing). 0, or -1 with errno. */
int tc_read_file_at(int dirfd, const char *name, size_t max, char **data, size_t *len);

/* Writes data to path atomically with the given mode (the umask applies).
 * Returns 0, or -1 with errno (the temporary file is removed on failure). */
int tc_write_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* The same, for a name in the directory dirfd (never following a link);
 * exact_mode: the file gets exactly mode, whatever the umask (shared
 * caches). The temporary's name fits NAME_MAX whatever the name's length. */
int tc_write_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                       int exact_mode);

/* Writes a build's output to path as compilers do: a regular file (or a
 * new one) is replaced atomically (through a symbolic link, the file it
 * names), keeping its permissions (a new one: 0666 less the umask; one
 * this process may not write is left alone, EACCES); anything else is
 * written in place: a device such as /dev/null, a FIFO, a file with other
 * hard links (they all see the new contents). A file that holds these
 * bytes already only gets the current time. 0, or -1 with errno. */
int tc_write_output(const char *path, const void *data, size_t len);

/* Writes all of data to the descriptor (retrying short writes and EINTR).
 * 0, or -1 with errno. */
int tc_write_all(int fd, const void *data, size_t len);

/* Writes data to path directly (for private scratch files). */
int tc_write_file(const char *path, const void *data, size_t len);

/* mkdir -p with the given mode for created directories. 0 or -1/errno. */
int tc_mkdir_p(const char *path, mode_t mode);

/* Removes name in the directory dirfd and, when it is a directory,
 * everything in it, through directory descriptors only: a link anywhere
 * is removed, never followed, even one swapped in while the walk runs.
 * Directories nested deeper than max_depth are left (and fail). 0 or -1. */
int tc_remove_tree_at(int dirfd, const char *name, int max_depth);
/* The same for a path (its last component is the tree). */
int tc_remove_tree(const char *path);

/* Where temporary files go: $TMPDIR, or /tmp when it is unset or empty. */
const char *tc_temp_root(void);
/* Creates a private temporary directory under tc_temp_root() named
 * <prefix>.XXXXXX; the returned string is malloc'd. NULL on failure with
 * errno. */
char *tc_make_temp_dir(const char *prefix);

/* Joins two path components into a malloc'd string. */
char *tc_path_join(const char *a, const char *b);

#endif
