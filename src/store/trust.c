/* trust: the checks behind whom a cache is trusted (see trust.h). */
#define _GNU_SOURCE
#include "store/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"

/* A secret shorter than this is guessable; longer is hashed by HMAC. */
#define SECRET_MIN 16
#define SECRET_MAX 4096

/* Whether this process is a member of group gid. */
static int in_group(gid_t gid)
{
    if (getegid() == gid)
        return 1;
    gid_t groups[256];
    int n = getgroups(sizeof groups / sizeof groups[0], groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

const char *tc_trust_directory(const struct stat *s, int shared)
{
    if (s->st_mode & S_IWOTH)
        return "it is writable by every user";
    if (shared && s->st_uid != geteuid() && !in_group(s->st_gid))
        return "it belongs to another user and to a group this user is not in";
    if (shared)
        return NULL; /* its group's members are trusted, as docs/remote.md says */
    if (s->st_uid != geteuid())
        return "it belongs to another user, and taskcache.conf does not say shared = true";
    if (s->st_mode & S_IWGRP)
        return "it is writable by its group, and taskcache.conf does not say shared = true";
    return NULL;
}

int tc_trust_file(const struct stat *s, int shared)
{
    return S_ISREG(s->st_mode) && (shared || s->st_uid == geteuid());
}

int tc_trust_load_secret(const char *path, tc_hmac_key *key, char id[24], char *why,
                         size_t whylen)
{
    char *data = NULL;
    size_t len = 0;
    /* the user's own file, which may well be a link (a mounted secret) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int rc = fd >= 0 ? tc_read_fd(fd, SECRET_MAX, &data, &len) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    while (rc == 0 && len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        len--;
    if (rc != 0 || len < SECRET_MIN) {
        if (rc != 0)
            snprintf(why, whylen, "cannot read the secret %s=%s: %s", TC_SECRET_ENV, path,
                     strerror(e));
        else
            snprintf(why, whylen, "the secret in %s is shorter than %d bytes", path,
                     SECRET_MIN);
        free(data);
        return -1;
    }
    tc_hmac_key_init(key, data, len);
    /* the id is a digest of the secret under a fixed message: it tells
     * secrets apart and reveals nothing of them */
    tc_hash *h = tc_hmac_begin(key);
    if (h)
        tc_hash_update(h, "taskcache key id", 16);
    tc_digest d;
    memset(&d, 0, sizeof d);
    if (h)
        tc_hmac_final(key, h, &d);
    if (!h)
        snprintf(why, whylen, "out of memory");
    char hex[TC_DIGEST_HEX_LEN + 1];
    tc_digest_hex(&d, hex);
    snprintf(id, 24, "hmac:%.16s", hex);
    explicit_bzero(data, len);
    free(data);
    return h ? 0 : -1;
}
