/* trust: whom a cache directory makes the store trust, decided when it is
 * opened. A private cache must be owned by this user and writable by
 * nobody else; a shared one (shared = true) by nobody outside its group.
 * Anything else is a directory another user can plant records in, and is
 * not used. With TASKCACHE_SECRET_FILE set, records must also carry an
 * HMAC under that file's secret, so that a member who can write the cache
 * but does not hold the secret cannot make anyone run what they wrote.
 * docs/remote.md ("Who must be trusted") says what each member can still do. */
#ifndef TC_STORE_TRUST_H
#define TC_STORE_TRUST_H

#include <stddef.h>
#include <sys/stat.h>

#include "util/hash.h"

/* Why a directory of the cache (its root, or one below it) must not be
 * trusted, in words, or NULL when it may be: s is its status; shared
 * whether the cache is shared by a group. */
const char *tc_trust_directory(const struct stat *s, int shared);

/* Whether a file of the cache may be trusted: a regular file, owned by
 * this user unless the cache is shared. */
int tc_trust_file(const struct stat *s, int shared);

/* Where the secret comes from: the user's environment, never the cache
 * directory (its members could point it at a secret of their own). */
#define TC_SECRET_ENV "TASKCACHE_SECRET_FILE"

/* Reads the secret file at path into key and names the secret in id (a
 * digest of it, which keys carry so that caches with other secrets or none
 * never share records). 0, or -1 with why filled. */
int tc_trust_load_secret(const char *path, tc_hmac_key *key, char id[24], char *why,
                         size_t whylen);

#endif
