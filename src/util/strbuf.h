/* strbuf: the one growable string/byte builder used everywhere in taskcache.
 * Every function that appends keeps the buffer NUL-terminated so that text
 * can be handed to C APIs directly; binary data may contain NULs. */
#ifndef TC_STRBUF_H
#define TC_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tc_sb {
    char *data;   /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    int oom;      /* set once an allocation failed; appends become no-ops */
} tc_sb;

#define TC_SB_INIT {NULL, 0, 0, 0}

void tc_sb_free(tc_sb *sb);
void tc_sb_reset(tc_sb *sb);                   /* len = 0, keeps memory */
int tc_sb_reserve(tc_sb *sb, size_t extra);    /* 0 ok, -1 out of memory */
void tc_sb_append(tc_sb *sb, const void *p, size_t n);
void tc_sb_puts(tc_sb *sb, const char *s);
void tc_sb_putc(tc_sb *sb, char c);
void tc_sb_printf(tc_sb *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tc_sb_vprintf(tc_sb *sb, const char *fmt, va_list ap);
/* Little-endian fixed-width integers and length-prefixed blobs, used by the
 * record encoder. */
/* Appends s[0..n) as a JSON string, quotes included. */
void tc_sb_json_string(tc_sb *sb, const char *s, size_t n);
void tc_sb_put_u32(tc_sb *sb, uint32_t v);
void tc_sb_put_u64(tc_sb *sb, uint64_t v);
void tc_sb_put_blob(tc_sb *sb, const void *p, size_t n);
/* Detaches the buffer: the caller owns the returned memory (never NULL
 * unless out of memory) and the builder is empty again. */
char *tc_sb_take(tc_sb *sb, size_t *len);

#endif
