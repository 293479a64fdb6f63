/* body: walks one PTX function (header and body) token by token and says
 * what each token is: where statements start, labels, the names a statement
 * declares, call targets, and whether an identifier names something
 * declared inside the function (a parameter, or a declaration of an
 * enclosing block, which shadows module symbols of the same name) or may
 * name a module symbol. The parser finds references with it and the slicer
 * renames and lays text out with it: one state machine, so the two cannot
 * disagree about PTX's scopes. */
#ifndef TC_PTX_BODY_H
#define TC_PTX_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "ptx/lex.h"
#include "util/map.h"

typedef enum {
    TC_BODY_HEADER = 0, /* a token of the function's header, before '{' */
    TC_BODY_OPEN,       /* '{' opening a block (the body's own is depth 1) */
    TC_BODY_CLOSE,      /* '}' closing a block */
    TC_BODY_END,        /* ';' ending a statement */
    TC_BODY_OPCODE,     /* the opcode or directive that starts a statement */
    TC_BODY_LABEL,      /* the name of a label definition ("name:") */
    TC_BODY_DECL,       /* a name declared here (a parameter, .reg, .local, ...) */
    TC_BODY_NAME,       /* an identifier operand (not a directive) */
    TC_BODY_CALLEE,     /* the function operand of a call instruction */
    TC_BODY_OTHER       /* punctuation, numbers, strings, type directives */
} tc_body_role;

/* State spaces of declarations, as module.h's tc_space plus the two that
 * exist only inside functions. */
enum { TC_BODY_SPACE_REG = 100, TC_BODY_SPACE_PARAM = 101 };

typedef struct tc_body_tok {
    tc_tok tok;
    uint8_t role;        /* tc_body_role */
    uint8_t stmt_start;  /* first token of a statement, label or block brace */
    uint8_t local;       /* NAME/CALLEE/DECL: a name declared in the function */
    uint16_t space;      /* DECL, or local NAME: the declaration's state space
                            (tc_space or TC_BODY_SPACE_*) */
    uint32_t decl;       /* DECL, or local NAME: the declaration's number in
                            order of appearance in the function (from 0) */
    uint8_t inlined;     /* an identifier right after "function_name" in a
                            .loc directive: the label of an inlined function's
                            .debug_str entry */
} tc_body_tok;

typedef struct tc_body_binding {
    const char *name;
    uint32_t len;
    uint32_t outer;      /* the binding it shadows: index + 1, or 0 */
    uint32_t decl;
    uint16_t space;
} tc_body_binding;

typedef struct tc_body {
    tc_lexer lx;
    int depth;           /* block depth: 0 in the header */
    int at_start;        /* the next token starts a statement */
    int stmt;            /* what the current statement is (body.c) */
    uint16_t decl_space;
    int call;            /* call operand state (body.c) */
    int paren;
    int nest;            /* () [] <> nesting inside a statement or header */
    int in_init;         /* after '=' in a declaration; in the header: in a .pragma */
    int operand_braces;  /* "{%r1, %r2}" vector operands, initializer braces */
    int pred;            /* inside a leading "@!%p" guard */
    uint32_t loc_line;   /* a .loc directive ends with its line, not ';' */
    int after_function_name; /* the last identifier of the .loc was "function_name" */
    int done;
    /* scopes: name -> innermost binding (index + 1); bindings of open
     * blocks are a stack, block_base[d] where block d's own begin */
    tc_map names;
    tc_body_binding *bind;
    size_t nbind, cap_bind;
    uint32_t *block_base;
    size_t cap_blocks;
    uint32_t ndecls;
    int oom;
    const char *err;     /* set when tc_body_next returns -1 (and !oom) */
    uint32_t err_line;
} tc_body;

/* Starts a walk over the function statement at p[0..n) (its first token is
 * the linkage or .func/.entry; n may extend past the statement's end). */
void tc_body_init(tc_body *w, const char *p, size_t n, uint32_t first_line);
/* Next token: 1 with *out filled; 0 past the function's last token (its
 * closing '}', or the ';' of a declaration); -1 on malformed input (w->err
 * and w->err_line) or out of memory (w->oom). */
int tc_body_next(tc_body *w, tc_body_tok *out);
void tc_body_free(tc_body *w);

/* The state space named by a directive token, or -1 for other tokens:
 * .global .const .shared .local .tex (tc_space) and .reg .param. */
int tc_body_space(const tc_tok *t);

#endif
