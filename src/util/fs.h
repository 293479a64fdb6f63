/* fs: the one place that reads and writes files. Writes that others may
 * read concurrently always go through tc_write_atomic (temporary file in the
 * same directory, then rename), so a reader sees the old file, the new
 * file, or nothing; never a partial one. */
#ifndef TC_FS_H
#define TC_FS_H

#include <stddef.h>
#include <sys/types.h>

/* Reads a whole file into malloc'd memory (NUL-terminated for convenience).
 * nofollow: refuse to open a symbolic link. Returns 0, or -1 with errno. */
int tc_read_file(const char *path, int nofollow, char **data, size_t *len);

int tc_read_file_at(int dirfd, const char *name, int nofollow, char **data, size_t *len);

/* Writes data to path atomically with the given mode. Returns 0, or -1 with
 * errno (the temporary file is removed on failure). */
int tc_write_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* The same, for a name in the directory dirfd (never following a link). */
int tc_write_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode);

/* Writes data to path directly (for private scratch files). */
int tc_write_file(const char *path, const void *data, size_t len);

/* mkdir -p with the given mode for created directories. 0 or -1/errno. */
int tc_mkdir_p(const char *path, mode_t mode);

/* Removes a directory tree without following symbolic links. 0 or -1. */
int tc_remove_tree(const char *path);

/* Creates a private temporary directory under $TMPDIR (or /tmp); the
 * returned string is malloc'd. NULL on failure with errno. */
char *tc_make_temp_dir(const char *prefix);

/* Joins two path components into a malloc'd string. */
char *tc_path_join(const char *a, const char *b);

#endif
