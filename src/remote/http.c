/* http: the HTTP(S) transport (libcurl): GET, PUT and DELETE of records
 * under a layout that plain servers serve (remote.h: subdirs for WebDAV
 * servers such as nginx with create_full_put_path, bazel for Bazel HTTP
 * caches such as bazel-remote). One curl handle per transport keeps its
 * connection alive between records. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "remote/transport.h"
#include "util/fs.h"
#include "util/hash.h"

/* A bearer token is a line of text; a file larger than this is not one. */
#define MAX_TOKEN_BYTES (16 << 10)

typedef struct http {
    tc_transport base;
    const tc_remote_spec *spec;
    CURL *curl;
    struct curl_slist *headers;
    char *bearer;               /* the token of bearer-token-file, or NULL */
    char server[128];           /* the last Server: header seen */
} http;

/* libcurl is opened when the first HTTP remote is, not linked: linked, it
 * and the two dozen libraries it needs load into every process that loads
 * taskcache (the driver interceptor joins every program `taskcache run`
 * starts), 4 ms of each start, with a remote or without. Only the calls
 * below are used; the soname has been libcurl.so.4 since 2006. */
#define LIBCURL "libcurl.so.4"

typedef struct curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*init)(void);
    void (*cleanup)(CURL *c);
    void (*reset)(CURL *c);
    CURLcode (*setopt)(CURL *c, CURLoption option, ...);
    CURLcode (*perform)(CURL *c);
    CURLcode (*getinfo)(CURL *c, CURLINFO info, ...);
    const char *(*strerror)(CURLcode rc);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
} curl_api;
static curl_api cu;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static char curl_problem[300] = "libcurl was not opened"; /* "" once it is ready */

static void init_curl(void)
{
    void *lib = dlopen(LIBCURL, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(curl_problem, sizeof curl_problem,
                 "HTTP remotes need libcurl on this machine (%s; Debian: libcurl4): %s", LIBCURL,
                 dlerror());
        return;
    }
    static const struct {
        const char *name;
        size_t offset;
    } calls[] = {
        {"curl_global_init", offsetof(curl_api, global_init)},
        {"curl_easy_init", offsetof(curl_api, init)},
        {"curl_easy_cleanup", offsetof(curl_api, cleanup)},
        {"curl_easy_reset", offsetof(curl_api, reset)},
        {"curl_easy_setopt", offsetof(curl_api, setopt)},
        {"curl_easy_perform", offsetof(curl_api, perform)},
        {"curl_easy_getinfo", offsetof(curl_api, getinfo)},
        {"curl_easy_strerror", offsetof(curl_api, strerror)},
        {"curl_slist_append", offsetof(curl_api, slist_append)},
        {"curl_slist_free_all", offsetof(curl_api, slist_free_all)},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        void *f = dlsym(lib, calls[i].name);
        if (!f) {
            snprintf(curl_problem, sizeof curl_problem, "%s lacks %s", LIBCURL, calls[i].name);
            return; /* the library stays open: its calls may be half taken */
        }
        memcpy((char *)&cu + calls[i].offset, &f, sizeof f);
    }
    CURLcode rc = cu.global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        snprintf(curl_problem, sizeof curl_problem, "libcurl cannot start: %s", cu.strerror(rc));
    else
        curl_problem[0] = '\0';
}

/* The URL of a record: base/v1/<target>/<kind>/<2 hex>/<62 hex> (subdirs:
 * the local layout, no directory holding more than 256 shards), or
 * base/ac/<SHA-256 of the name> (bazel). */
static void record_url(const http *h, const char *name, tc_sb *url)
{
    tc_sb_printf(url, "%s/", h->spec->base_url);
    if (h->spec->layout == TC_LAYOUT_BAZEL) {
        tc_digest d;
        char hex[TC_DIGEST_HEX_LEN + 1];
        tc_digest_of(name, strlen(name), &d);
        tc_digest_hex(&d, hex);
        tc_sb_printf(url, "ac/%s", hex);
        return;
    }
    const char *last = strrchr(name, '/');
    last = last ? last + 1 : name;
    tc_sb_printf(url, "v1/%.*s", (int)(last - name), name);
    if (strlen(last) > 2)
        tc_sb_printf(url, "%.2s/%s", last, last + 2);
    else
        tc_sb_puts(url, last);
}

/* ---- bodies ------------------------------------------------------------------------------ */

typedef struct sink {
    tc_sb *out;                 /* NULL: the body is not wanted */
    uint64_t max;
    int too_large;
} sink;

static size_t on_body(char *p, size_t size, size_t nmemb, void *ctx)
{
    sink *s = ctx;
    size_t n = size * nmemb;
    if (!s->out)
        return n;
    if (s->out->len + n > s->max) {
        s->too_large = 1;
        return 0; /* curl stops the transfer: CURLE_WRITE_ERROR */
    }
    tc_sb_append(s->out, p, n);
    return s->out->oom ? 0 : n;
}

typedef struct source {
    const char *p;
    size_t left;
} source;

static size_t on_upload(char *buf, size_t size, size_t nitems, void *ctx)
{
    source *s = ctx;
    size_t n = size * nitems < s->left ? size * nitems : s->left;
    memcpy(buf, s->p, n);
    s->p += n;
    s->left -= n;
    return n;
}

static size_t on_header(char *p, size_t size, size_t nitems, void *ctx)
{
    http *h = ctx;
    size_t n = size * nitems;
    if (n > 7 && !strncasecmp(p, "server:", 7)) {
        size_t skip = 7 + strspn(p + 7, " \t"), v = n - skip;
        while (v && (p[skip + v - 1] == '\r' || p[skip + v - 1] == '\n'))
            v--;
        snprintf(h->server, sizeof h->server, "%.*s", (int)v, p + skip);
    }
    return n;
}

/* ---- requests ---------------------------------------------------------------------------- */

/* What curl's failure means: the server is not there or stalled (DOWN),
 * or a transfer went wrong in a way another attempt may mend (FAILED). */
static tc_remote_outcome judge_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        return TC_REMOTE_DOWN;
    default:
        return TC_REMOTE_FAILED;
    }
}

/* An HTTP status other than the expected one: a 4xx says the request
 * itself is refused (a retry is sent the same answer), save a timeout
 * (408), "too early" (425) and "too many requests" (429), which say
 * "later"; anything else (5xx) may be gone on the next attempt. */
static tc_remote_outcome judge_status(long status)
{
    int later = status == 408 || status == 425 || status == 429;
    return status >= 400 && status < 500 && !later ? TC_REMOTE_REFUSED : TC_REMOTE_FAILED;
}

/* Words for an HTTP status a server gave instead of the expected one. */
static const char *status_hint(long status)
{
    switch (status) {
    case 401:
    case 403: return " (check the credentials: user:password@ in the URL, or bearer-token-file)";
    case 405: return " (the server does not take this method: is WebDAV on, with PUT?)";
    case 413: return " (the server refuses a record this large: client_max_body_size?)";
    case 507: return " (the server is full)";
    default: return status >= 500 ? " (a server error)" : "";
    }
}

/* A transfer's clock: it may take the timeout plus a second per 256 KiB of
 * what it moves (received so far, or the record it sends; a size the
 * server announces earns nothing). CURLOPT_TIMEOUT is set before the size
 * is known, from the largest record of the kind (a GiB for a module: 68
 * minutes), so a server sending 2 KiB/s, above the stall limit, held a
 * build that long. */
typedef struct transfer_clock {
    double start, timeout_s;
    int expired;
    const tc_transport *t; /* its cancel flag ends the transfer too */
    int cancelled;
} transfer_clock;

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    transfer_clock *k = ctx;
    (void)dltotal;
    (void)ulnow;
    curl_off_t moved = ultotal > dlnow ? ultotal : dlnow;
    /* libcurl calls this at least once a second while nothing moves */
    if (tc_transport_cancelled(k->t)) {
        k->cancelled = 1;
        return 1;
    }
    if (tc_remote_now() - k->start > tc_remote_allowance(k->timeout_s, (uint64_t)moved)) {
        k->expired = 1;
        return 1; /* ends the transfer: CURLE_ABORTED_BY_CALLBACK */
    }
    return 0;
}

/* One request. method: "GET", "PUT", "DELETE" or "HEAD"; body/len: what
 * to PUT; out (GET): where the body goes, at most max bytes. *status
 * receives the HTTP status when the server answered. */
static tc_remote_outcome request(http *h, const char *method, const char *url, const void *body,
                                 size_t len, tc_sb *out, uint64_t max, long *status, char *why,
                                 size_t n)
{
    CURL *c = h->curl;
    const tc_remote_spec *s = h->spec;
    *status = 0;
    /* a reset keeps the handle's live connection: records reuse it */
    cu.reset(c);
    sink snk = {out, max, 0};
    source src = {body, len};
    char err[CURL_ERROR_SIZE] = "";
    cu.setopt(c, CURLOPT_URL, url);
    cu.setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    cu.setopt(c, CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
    /* A stall (under 1 KiB/s for `timeout`) ends a transfer; its length
     * does not: a large record on a slow link gets time in proportion (a
     * second per 256 KiB on top), so that one big module does not take the
     * remote down for the rest of the process */
    uint64_t size = len ? len : max;
    cu.setopt(c, CURLOPT_TIMEOUT_MS, (long)(s->timeout_ms + (size >> 18) * 1000));
    cu.setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    cu.setopt(c, CURLOPT_LOW_SPEED_TIME, (long)((s->timeout_ms + 999) / 1000));
    transfer_clock clock = {tc_remote_now(), (double)s->timeout_ms / 1000, 0, &h->base, 0};
    cu.setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu.setopt(c, CURLOPT_XFERINFODATA, &clock);
    cu.setopt(c, CURLOPT_NOPROGRESS, 0L);
    cu.setopt(c, CURLOPT_ERRORBUFFER, err);
    cu.setopt(c, CURLOPT_HTTPHEADER, h->headers);
    cu.setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    cu.setopt(c, CURLOPT_WRITEDATA, &snk);
    cu.setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    cu.setopt(c, CURLOPT_HEADERDATA, h);
    cu.setopt(c, CURLOPT_USERAGENT, "taskcache");
    if (max)
        cu.setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max);
    if (h->bearer) {
        cu.setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        cu.setopt(c, CURLOPT_XOAUTH2_BEARER, h->bearer);
    } else if (s->aws_sigv4[0]) {
        /* S3 and compatible stores: libcurl signs each request (7.75+) */
        cu.setopt(c, CURLOPT_AWS_SIGV4, s->aws_sigv4);
        cu.setopt(c, CURLOPT_USERNAME, s->user);
        cu.setopt(c, CURLOPT_PASSWORD, s->password);
    } else if (s->user[0] || s->password[0]) {
        cu.setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        cu.setopt(c, CURLOPT_USERNAME, s->user);
        cu.setopt(c, CURLOPT_PASSWORD, s->password);
    }
    if (s->ca[0]) {
        struct stat st;
        int dir = stat(s->ca, &st) == 0 && S_ISDIR(st.st_mode);
        cu.setopt(c, dir ? CURLOPT_CAPATH : CURLOPT_CAINFO, s->ca);
    }
    if (!strcmp(method, "PUT")) {
        cu.setopt(c, CURLOPT_UPLOAD, 1L);
        cu.setopt(c, CURLOPT_READFUNCTION, on_upload);
        cu.setopt(c, CURLOPT_READDATA, &src);
        cu.setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
    } else if (!strcmp(method, "HEAD")) {
        cu.setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET")) {
        cu.setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = cu.perform(c);
    if (rc == CURLE_OK || rc == CURLE_WRITE_ERROR || rc == CURLE_FILESIZE_EXCEEDED)
        cu.getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (rc == CURLE_OK)
        return TC_REMOTE_OK;
    if (snk.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
        snprintf(why, n, "%s %s: the answer is larger than any record of its kind", method, url);
        return TC_REMOTE_FAILED;
    }
    if (clock.cancelled) {
        snprintf(why, n, "%s %s: cancelled", method, url);
        return TC_REMOTE_CANCELLED;
    }
    if (clock.expired) {
        snprintf(why, n, "%s %s: timed out (longer than the timeout, %g s, and a second "
                         "per 256 KiB it moved)", method, url, clock.timeout_s);
        return TC_REMOTE_DOWN; /* as a stall is */
    }
    snprintf(why, n, "%s %s: %s", method, url, err[0] ? err : cu.strerror(rc));
    return judge_curl(rc);
}

static tc_remote_outcome http_get(tc_transport *t, const char *name, uint64_t max, tc_sb *out,
                                  char *why, size_t n)
{
    http *h = (http *)t;
    tc_sb url = TC_SB_INIT;
    record_url(h, name, &url);
    long status;
    tc_remote_outcome o = request(h, "GET", url.data, NULL, 0, out, max, &status, why, n);
    if (o == TC_REMOTE_OK && (status == 404 || status == 410)) {
        o = TC_REMOTE_MISSING;
    } else if (o == TC_REMOTE_OK && status != 200) {
        snprintf(why, n, "GET %s: HTTP %ld%s", url.data, status, status_hint(status));
        o = judge_status(status);
    }
    if (o != TC_REMOTE_OK)
        tc_sb_reset(out);
    tc_sb_free(&url);
    return o;
}

static tc_remote_outcome http_put(tc_transport *t, const char *name, const void *data,
                                  size_t len, char *why, size_t n)
{
    http *h = (http *)t;
    tc_sb url = TC_SB_INIT;
    record_url(h, name, &url);
    long status;
    tc_remote_outcome o = request(h, "PUT", url.data, data, len, NULL, 0, &status, why, n);
    if (o == TC_REMOTE_OK && status != 200 && status != 201 && status != 204) {
        snprintf(why, n, "PUT %s: HTTP %ld%s", url.data, status, status_hint(status));
        o = judge_status(status);
    }
    tc_sb_free(&url);
    return o;
}

static tc_remote_outcome http_remove(tc_transport *t, const char *name, char *why, size_t n)
{
    http *h = (http *)t;
    tc_sb url = TC_SB_INIT;
    record_url(h, name, &url);
    long status;
    tc_remote_outcome o = request(h, "DELETE", url.data, NULL, 0, NULL, 0, &status, why, n);
    if (o == TC_REMOTE_OK && status >= 300 && status != 404) {
        snprintf(why, n, "DELETE %s: HTTP %ld%s", url.data, status, status_hint(status));
        o = judge_status(status);
    }
    tc_sb_free(&url);
    return o;
}

static tc_remote_outcome http_server_info(tc_transport *t, char *server, size_t server_len,
                                          int64_t *bytes, int64_t *records, char *why, size_t n)
{
    http *h = (http *)t;
    tc_sb url = TC_SB_INIT;
    tc_sb_printf(&url, "%s/", h->spec->base_url);
    long status;
    h->server[0] = '\0';
    /* any answer will do: the question is whether a server is there */
    tc_remote_outcome o = request(h, "HEAD", url.data, NULL, 0, NULL, 0, &status, why, n);
    tc_sb_free(&url);
    *bytes = *records = -1; /* HTTP has no standard way to say */
    snprintf(server, server_len, "HTTP server%s%s", h->server[0] ? " " : "", h->server);
    return o;
}

static void http_free(tc_transport *t)
{
    http *h = (http *)t;
    cu.cleanup(h->curl);
    cu.slist_free_all(h->headers);
    free(h->bearer);
    free(h);
}

static const tc_transport_ops http_ops = {http_get, http_put, http_remove, http_server_info,
                                          http_free};

/* The token in the spec's bearer-token-file: its first line, which must
 * be printable (it goes into a header). */
static char *read_token(const char *path, char *why, size_t n)
{
    char *data = NULL;
    size_t len = 0;
    if (tc_read_file(path, 0, &data, &len) != 0) {
        snprintf(why, n, "cannot read bearer-token-file %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t line = strcspn(data, "\r\n");
    data[line] = '\0';
    int ok = len <= MAX_TOKEN_BYTES && line > 0;
    for (size_t i = 0; ok && i < line; i++)
        ok = (unsigned char)data[i] > ' ' && (unsigned char)data[i] < 0x7f;
    if (!ok) {
        snprintf(why, n, "bearer-token-file %s does not hold a token (one line of printable "
                         "characters)", path);
        free(data);
        return NULL;
    }
    return data;
}

tc_transport *tc_http_open(const tc_remote_spec *spec, char *why, size_t n)
{
    pthread_once(&curl_once, init_curl);
    if (curl_problem[0]) {
        snprintf(why, n, "%s", curl_problem);
        return NULL;
    }
    http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(why, n, "%s", "out of memory");
        return NULL;
    }
    h->base.ops = &http_ops;
    h->spec = spec;
    if (spec->bearer_file[0] && !(h->bearer = read_token(spec->bearer_file, why, n))) {
        free(h);
        return NULL;
    }
    /* no "Expect: 100-continue": it costs a round trip (or a second, with
     * a server that ignores it) on every large record */
    h->headers = cu.slist_append(NULL, "Expect:");
    h->curl = cu.init();
    if (!h->curl || !h->headers) {
        snprintf(why, n, "%s", "out of memory");
        http_free(&h->base);
        return NULL;
    }
    return &h->base;
}
