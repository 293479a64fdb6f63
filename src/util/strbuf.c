/* strbuf: growable byte/string builder (see strbuf.h). */
#include "util/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tc_sb_free(tc_sb *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
}

void tc_sb_reset(tc_sb *sb)
{
    sb->len = 0;
    if (sb->data)
        sb->data[0] = '\0';
}

int tc_sb_reserve(tc_sb *sb, size_t extra)
{
    if (sb->oom)
        return -1;
    if (sb->len + extra + 1 <= sb->cap)
        return 0;
    size_t want = sb->cap ? sb->cap : 64;
    while (want < sb->len + extra + 1) {
        if (want > SIZE_MAX / 2) {
            sb->oom = 1;
            return -1;
        }
        want *= 2;
    }
    char *p = realloc(sb->data, want);
    if (!p) {
        sb->oom = 1;
        return -1;
    }
    sb->data = p;
    sb->cap = want;
    return 0;
}

void tc_sb_append(tc_sb *sb, const void *p, size_t n)
{
    if (tc_sb_reserve(sb, n) != 0)
        return;
    if (n)
        memcpy(sb->data + sb->len, p, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void tc_sb_puts(tc_sb *sb, const char *s) { tc_sb_append(sb, s, strlen(s)); }

void tc_sb_putc(tc_sb *sb, char c) { tc_sb_append(sb, &c, 1); }

void tc_sb_vprintf(tc_sb *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || tc_sb_reserve(sb, (size_t)n) != 0)
        return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void tc_sb_printf(tc_sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

void tc_sb_put_u32(tc_sb *sb, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    tc_sb_append(sb, b, 4);
}

void tc_sb_put_u64(tc_sb *sb, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    tc_sb_append(sb, b, 8);
}

void tc_sb_put_blob(tc_sb *sb, const void *p, size_t n)
{
    tc_sb_put_u64(sb, (uint64_t)n);
    tc_sb_append(sb, p, n);
}

char *tc_sb_take(tc_sb *sb, size_t *len)
{
    if (!sb->data && !sb->oom)
        tc_sb_reserve(sb, 0);
    if (sb->oom) {
        tc_sb_free(sb);
        if (len)
            *len = 0;
        return NULL;
    }
    char *p = sb->data;
    if (len)
        *len = sb->len;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return p;
}

/* The length of the well-formed UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    /* no overlong forms, no surrogates, nothing past U+10FFFF */
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) ||
        (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))
        return 0;
    return len;
}

void tc_sb_json_string(tc_sb *sb, const char *s, size_t n)
{
    tc_sb_putc(sb, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c >= 0x80 ? utf8_len((const unsigned char *)s + i, n - i) : 1;
        if (c == '"' || c == '\\')
            tc_sb_printf(sb, "\\%c", c);
        else if (c < 0x20)
            tc_sb_printf(sb, "\\u%04x", c);
        else if (k == 0) /* not UTF-8 (a file name's bytes): JSON must be */
            tc_sb_puts(sb, "\\ufffd");
        else
            tc_sb_append(sb, s + i, k);
        i += k ? k : 1;
    }
    tc_sb_putc(sb, '"');
}
