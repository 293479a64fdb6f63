/* config: parsing taskcache.conf, sizes, durations and remote specs (see
 * config.h). */
#define _GNU_SOURCE
#include "store/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

int tc_config_parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (!s || end == s || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    /* 2^64 bytes and more (or "nan", "inf", which strtod also reads) is no
     * size: converting it to an integer would be undefined */
    double bytes = v * mult;
    if (*end || !(bytes < 18446744073709551616.0))
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

static int truthy(const char *v)
{
    return !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes");
}

/* A "key = value" line (line holds no comment any more): *key and *value,
 * both trimmed, the value to the end of the line ("10 G" is one value,
 * spaces and all); 0 when the line sets nothing. */
static int setting(char *line, char **key, char **value)
{
    char *k = line + strspn(line, " \t");
    size_t klen = strspn(k, "abcdefghijklmnopqrstuvwxyz_");
    char *eq = k + klen + strspn(k + klen, " \t");
    if (!klen || *eq != '=')
        return 0;
    k[klen] = '\0'; /* may be the '=' itself, which eq has passed */
    char *v = eq + 1 + strspn(eq + 1, " \t");
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
        v[--n] = '\0';
    *key = k;
    *value = v;
    return 1;
}

void tc_config_parse(const char *text, size_t len, tc_config *cfg)
{
    char *copy = strndup(text, len);
    if (!copy)
        return; /* out of memory: the defaults stand */
    unsigned lineno = 1;
    for (char *line = copy, *next; line; line = next, lineno++) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *key, *value;
        if (!setting(line, &key, &value))
            continue;
        if (!strcmp(key, "remote")) {
            /* a spec too long for the buffer is kept cut, and then fails to
             * parse with a message, rather than pass for a shorter one */
            snprintf(cfg->remote, sizeof cfg->remote, "%s", value);
            cfg->remote_line = lineno;
        } else if (!strcmp(key, "max_size")) {
            tc_config_parse_size(value, &cfg->max_size);
        } else if (!strcmp(key, "shared")) {
            cfg->shared = truthy(value);
        }
    }
    free(copy);
}

int tc_config_parse_duration(const char *s, long long *ms)
{
    char *end;
    /* a decimal number: strtod also reads "nan", "inf" and hex */
    if (!s || !((*s >= '0' && *s <= '9') || *s == '.'))
        return -1;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0)) /* NaN fails every comparison */
        return -1;
    double mult = 1000;
    if (!strcmp(end, "ms"))
        mult = 1;
    else if (!strcmp(end, "m"))
        mult = 60e3;
    else if (!strcmp(end, "h"))
        mult = 3600e3;
    else if (!strcmp(end, "d"))
        mult = 86400e3;
    else if (*end && strcmp(end, "s"))
        return -1;
    if (v * mult > 1e15)
        return -1; /* beyond any sensible wait, and beyond long long's range for some inputs */
    *ms = (long long)(v * mult);
    return 0;
}

/* ---- remote specs ------------------------------------------------------------------ */

static int fail(char *why, size_t n, const char *fmt, const char *arg)
{
    snprintf(why, n, fmt, arg);
    return -1;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Percent-decodes p[0..len) into out (cap bytes). 0, or -1 when it is not
 * well-formed, does not fit, or decodes to a NUL. */
static int percent_decode(const char *p, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)p[i];
        if (c == '%') {
            if (len - i < 3 || hexval(p[i + 1]) < 0 || hexval(p[i + 2]) < 0)
                return -1;
            c = hexval(p[i + 1]) * 16 + hexval(p[i + 2]);
            i += 2;
        }
        if (c == 0 || k + 1 >= cap)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

/* Whether c may appear in a host name or address as given in a URL (an
 * IPv6 address adds ':' and a zone's '%'): no separators, spaces or
 * controls, so that nothing parsed here can change the shape of a URL or
 * of a command built from it. */
static int host_char(char c, int v6)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || (v6 && (c == ':' || c == '%'));
}

/* One "host[:port]" or "[v6 address][:port]" of p[0..len). */
static int parse_host(const char *p, size_t len, int default_port, tc_remote_host *h, char *why,
                      size_t n)
{
    const char *host = p, *end = p + len, *port = NULL;
    size_t hlen;
    int v6 = len && p[0] == '[';
    if (v6) {
        const char *close = memchr(p, ']', len);
        if (!close)
            return fail(why, n, "%s", "an IPv6 address in [ ] lacks its ']'");
        host = p + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < end) {
            if (close[1] != ':')
                return fail(why, n, "%s", "only ':PORT' may follow an IPv6 address in [ ]");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(p, ':', len);
        hlen = colon ? (size_t)(colon - p) : len;
        if (colon)
            port = colon + 1;
    }
    if (!hlen)
        return fail(why, n, "%s", "a host name is missing");
    if (v6 && !memchr(host, ':', hlen))
        return fail(why, n, "%s", "[ ] holds an IPv6 address, which has a ':'");
    if (hlen >= sizeof h->name)
        return fail(why, n, "%s", "a host name is too long");
    for (size_t i = 0; i < hlen; i++)
        if (!host_char(host[i], v6))
            return fail(why, n, "%s", "a host name holds a character no host name has");
    memcpy(h->name, host, hlen);
    h->name[hlen] = '\0';
    h->port = default_port;
    if (port) {
        long v = 0;
        if (port == end)
            return fail(why, n, "%s", "':' is not followed by a port number");
        for (const char *q = port; q < end; q++)
            if (*q < '0' || *q > '9' || (v = v * 10 + (*q - '0')) > 65535)
                return fail(why, n, "%s", "a port is a number from 1 to 65535");
        if (v < 1)
            return fail(why, n, "%s", "a port is a number from 1 to 65535");
        h->port = (int)v;
    }
    return 0;
}

/* The attributes a spec may carry, and which kinds take them. */
enum { FOR_HTTP = 1, FOR_REDIS = 2 };
static const struct {
    const char *name;
    int takes_value;
    int kinds;
} attributes[] = {
    {"read-only", 0, FOR_HTTP | FOR_REDIS},    {"connect-timeout", 1, FOR_HTTP | FOR_REDIS},
    {"timeout", 1, FOR_HTTP | FOR_REDIS},      {"flush-timeout", 1, FOR_HTTP | FOR_REDIS},
    {"retries", 1, FOR_HTTP | FOR_REDIS},      {"max-record", 1, FOR_HTTP | FOR_REDIS},
    {"ca", 1, FOR_HTTP | FOR_REDIS},           {"ttl", 1, FOR_REDIS},
    {"layout", 1, FOR_HTTP},                   {"bearer-token-file", 1, FOR_HTTP},
    {"aws-sigv4", 1, FOR_HTTP},                {"password-file", 1, FOR_HTTP | FOR_REDIS},
};

static int copy_value(char *out, size_t cap, const char *v, const char *what, char *why, size_t n)
{
    if (!*v || strlen(v) >= cap)
        return fail(why, n, "%s needs a value that fits", what);
    strcpy(out, v);
    return 0;
}

#define CUT_CREDENTIALS                                                                    \
    "an '@' after the host: write '/', '|' and '@' in a user name or password as %2F, %7C " \
    "and %40"

/* Applies one attribute ("name" or "name=value") to spec. */
static int apply_attribute(char *attr, tc_remote_spec *spec, char *why, size_t n)
{
    char *eq = strchr(attr, '=');
    const char *value = eq ? eq + 1 : NULL;
    if (eq)
        *eq = '\0';
    size_t k = 0, count = sizeof attributes / sizeof attributes[0];
    while (k < count && strcmp(attributes[k].name, attr))
        k++;
    if (k == count)
        return fail(why, n,
                    "unknown attribute '%s' (read-only, connect-timeout, timeout, "
                    "flush-timeout, retries, max-record, ca, ttl, layout, bearer-token-file, "
                    "aws-sigv4, password-file)",
                    attr);
    int kind = spec->kind == TC_REMOTE_HTTP ? FOR_HTTP : FOR_REDIS;
    if (!(attributes[k].kinds & kind))
        return fail(why, n, "'%s' applies to the other kind of server", attr);
    if (attributes[k].takes_value && !value)
        return fail(why, n, "'%s' needs a value (NAME=VALUE)", attr);
    if (!attributes[k].takes_value && value)
        return fail(why, n, "'%s' takes no value", attr);
    long long ms;
    long *timeout = !strcmp(attr, "connect-timeout") ? &spec->connect_timeout_ms
                    : !strcmp(attr, "timeout")       ? &spec->timeout_ms
                    : !strcmp(attr, "flush-timeout") ? &spec->flush_timeout_ms
                                                     : NULL;
    if (!strcmp(attr, "read-only")) {
        spec->read_only = 1;
    } else if (timeout) {
        if (tc_config_parse_duration(value, &ms) != 0 || ms < 1 || ms > 86400000)
            return fail(why, n, "%s takes a duration from 1ms to 1d, such as 500ms or 10s", attr);
        *timeout = (long)ms;
    } else if (!strcmp(attr, "ttl")) {
        if (tc_config_parse_duration(value, &ms) != 0 || ms % 1000)
            return fail(why, n, "%s takes whole seconds, such as 3600, 12h or 7d (0: none)", attr);
        spec->ttl_s = ms / 1000;
    } else if (!strcmp(attr, "retries")) {
        if (strlen(value) != 1 || value[0] < '0' || value[0] > '9')
            return fail(why, n, "%s takes a number from 0 to 9", attr);
        spec->retries = value[0] - '0';
    } else if (!strcmp(attr, "max-record")) {
        if (tc_config_parse_size(value, &spec->max_record) != 0 || !spec->max_record)
            return fail(why, n, "%s takes a size such as 64M", attr);
    } else if (!strcmp(attr, "layout")) {
        if (!strcmp(value, "subdirs"))
            spec->layout = TC_LAYOUT_SUBDIRS;
        else if (!strcmp(value, "bazel"))
            spec->layout = TC_LAYOUT_BAZEL;
        else
            return fail(why, n, "layout is subdirs or bazel, not '%s'", value);
    } else if (!strcmp(attr, "ca")) {
        return copy_value(spec->ca, sizeof spec->ca, value, attr, why, n);
    } else if (!strcmp(attr, "aws-sigv4")) {
        for (const char *q = value; *q; q++)
            if (!host_char(*q, 0) && *q != ':')
                return fail(why, n, "%s takes PROVIDER:...:REGION:SERVICE, such as "
                                    "aws:amz:us-east-1:s3", attr);
        return copy_value(spec->aws_sigv4, sizeof spec->aws_sigv4, value, attr, why, n);
    } else if (!strcmp(attr, "password-file")) {
        return copy_value(spec->password_file, sizeof spec->password_file, value, attr, why, n);
    } else {
        return copy_value(spec->bearer_file, sizeof spec->bearer_file, value, attr, why, n);
    }
    return 0;
}

/* The user and password of "USER:PASSWORD@" (p[0..len)). */
static int parse_userinfo(const char *p, size_t len, tc_remote_spec *spec, char *why, size_t n)
{
    const char *colon = memchr(p, ':', len);
    size_t ulen = colon ? (size_t)(colon - p) : len;
    if (percent_decode(p, ulen, spec->user, sizeof spec->user) != 0 ||
        (colon && percent_decode(colon + 1, len - ulen - 1, spec->password,
                                 sizeof spec->password) != 0))
        return fail(why, n, "%s", "the user or password is not well-formed (write "
                                  "special characters as %XX)");
    return 0;
}

/* Splits "scheme://authority/path" of url into spec. */
static int parse_url(char *url, tc_remote_spec *spec, char *why, size_t n)
{
    char *sep = strstr(url, "://");
    if (!sep)
        return fail(why, n, "%s", "not a URL: it begins with none of http://, https://, "
                                  "redis://, rediss://");
    *sep = '\0';
    const char *scheme = url;
    if (!strcmp(scheme, "http") || !strcmp(scheme, "https"))
        spec->kind = TC_REMOTE_HTTP;
    else if (!strcmp(scheme, "redis") || !strcmp(scheme, "rediss"))
        spec->kind = TC_REMOTE_REDIS;
    else
        return fail(why, n, "unknown scheme '%s' (http, https, redis, rediss)", scheme);
    spec->tls = !strcmp(scheme, "https") || !strcmp(scheme, "rediss");
    char *auth = sep + 3, *path = auth + strcspn(auth, "/");
    if (strchr(path, '@'))
        return fail(why, n, "%s", CUT_CREDENTIALS);
    if (strpbrk(auth, "?#"))
        return fail(why, n, "%s", "a remote URL has no query or fragment ('?', '#'); write "
                                  "them as %XX in a password");
    size_t alen = (size_t)(path - auth);
    char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (auth[i] == '@')
            at = auth + i; /* the last '@': a password may hold one */
    if (at) {
        if (parse_userinfo(auth, (size_t)(at - auth), spec, why, n) != 0)
            return -1;
        alen -= (size_t)(at + 1 - auth);
        auth = at + 1;
    }
    int default_port = spec->kind == TC_REMOTE_REDIS ? 6379 : spec->tls ? 443 : 80;
    /* a Redis spec may name several nodes (of one cluster) to start from */
    for (size_t i = 0; i <= alen;) {
        size_t j = i;
        while (j < alen && auth[j] != ',')
            j++;
        if (spec->nhosts == TC_REMOTE_MAX_HOSTS)
            return fail(why, n, "%s", "more than 16 hosts");
        if (parse_host(auth + i, j - i, default_port, &spec->hosts[spec->nhosts++], why, n) != 0)
            return -1;
        i = j + 1;
    }
    if (spec->kind == TC_REMOTE_HTTP) {
        if (spec->nhosts != 1)
            return fail(why, n, "%s", "an HTTP remote names one host");
        while (*path && path[strlen(path) - 1] == '/')
            path[strlen(path) - 1] = '\0';
        for (const char *q = path; *q; q++)
            if ((unsigned char)*q <= ' ' || *q == '\\' || (unsigned char)*q >= 0x7f)
                return fail(why, n, "%s", "the URL's path holds a space or a control character");
        const tc_remote_host *h = &spec->hosts[0];
        int v6 = strchr(h->name, ':') != NULL;
        if ((size_t)snprintf(spec->base_url, sizeof spec->base_url, "%s://%s%s%s:%d%s", scheme,
                             v6 ? "[" : "", h->name, v6 ? "]" : "", h->port, path) >=
            sizeof spec->base_url)
            return fail(why, n, "%s", "the URL is too long");
    } else if (*path && strcmp(path, "/")) {
        char *end;
        long db = strtol(path + 1, &end, 10);
        if (*end || end == path + 1 || db < 0 || db > 1000000)
            return fail(why, n, "a Redis URL's path is a database number, not '%s'", path);
        spec->db = (int)db;
    }
    return 0;
}

/* What a user is shown: the URL without credentials, and read-only. */
static void describe(tc_remote_spec *spec)
{
    tc_sb d = TC_SB_INIT;
    if (spec->kind == TC_REMOTE_HTTP) {
        tc_sb_puts(&d, spec->base_url);
    } else {
        tc_sb_printf(&d, "%s://", spec->tls ? "rediss" : "redis");
        for (int i = 0; i < spec->nhosts; i++) {
            int v6 = strchr(spec->hosts[i].name, ':') != NULL;
            tc_sb_printf(&d, "%s%s%s%s:%d", i ? "," : "", v6 ? "[" : "", spec->hosts[i].name,
                         v6 ? "]" : "", spec->hosts[i].port);
        }
        if (spec->db)
            tc_sb_printf(&d, "/%d", spec->db);
    }
    if (spec->read_only)
        tc_sb_puts(&d, " (read-only)");
    snprintf(spec->description, sizeof spec->description, "%s", d.data ? d.data : "");
    tc_sb_free(&d);
}

int tc_config_parse_remote(const char *text, tc_remote_spec *spec, char *why, size_t whylen)
{
    memset(spec, 0, sizeof *spec);
    why[0] = '\0';
    if (!strcmp(text, "none") || !strcmp(text, "off"))
        return 0;
    char *copy = strdup(text);
    if (!copy)
        return fail(why, whylen, "%s", "out of memory");
    char *attrs = strchr(copy, '|');
    if (attrs)
        *attrs++ = '\0';
    /* An '@' past the host means a user name or password held a '/' or a
     * '|' and was cut there: refused without repeating any of it (the
     * pieces would otherwise be echoed as a path or an attribute, or
     * taken for the host) */
    int rc = attrs && strchr(attrs, '@') ? fail(why, whylen, "%s", CUT_CREDENTIALS)
                                         : parse_url(copy, spec, why, whylen);
    /* defaults, chosen for a server on the local network: a connect that
     * takes half a second is a server that is not there (100 ms, ccache's
     * choice, failed connects to 127.0.0.1 among 32 builds on 2 cores: the
     * time runs while the process waits for a core); an operation gets
     * 10 s, room for a large record */
    spec->connect_timeout_ms = 500;
    spec->timeout_ms = 10000;
    spec->flush_timeout_ms = 10000;
    spec->retries = 2;
    /* Redis keeps values in memory: a record past this is not uploaded */
    spec->max_record = spec->kind == TC_REMOTE_REDIS ? (uint64_t)64 << 20 : (uint64_t)1 << 30;
    for (char *a = attrs, *next; rc == 0 && a; a = next) {
        next = strchr(a, '|');
        if (next)
            *next++ = '\0';
        if (*a)
            rc = apply_attribute(a, spec, why, whylen);
    }
    if (rc == 0 && spec->aws_sigv4[0] && (!spec->user[0] || !spec->password[0]))
        rc = fail(why, whylen, "%s", "aws-sigv4 signs with the access key and secret of the "
                                     "URL: https://KEY:SECRET@host/bucket");
    if (rc == 0 && spec->aws_sigv4[0] && spec->bearer_file[0])
        rc = fail(why, whylen, "%s", "aws-sigv4 and bearer-token-file exclude each other");
    if (rc == 0)
        describe(spec);
    free(copy);
    if (rc != 0) {
        char *keep = strdup(why);
        if (keep) {
            /* the words name the part; the spec itself may hold a password */
            snprintf(why, whylen, "bad remote spec: %s", keep);
            free(keep);
        }
        memset(spec, 0, sizeof *spec);
    }
    return rc;
}
