/* body: the statement and scope walker of PTX functions (see body.h).
 *
 * PTX scoping: parameters are visible in the whole function; a name
 * declared in a block ({ ... }) is visible from its declaration to the end
 * of that block and hides any outer name, a module symbol included; labels
 * belong to the whole function. Braces open a block only where a statement
 * may start; elsewhere they group vector operands or initializers. */
#include "ptx/body.h"

#include <stdlib.h>
#include <string.h>

#include "ptx/module.h"

enum { STMT_PLAIN, STMT_DECL, STMT_LOC, STMT_CALL, STMT_GUARDED /* opcode due */ };
enum { CALL_NONE, CALL_START, CALL_RETLIST, CALL_AFTER_RET, CALL_CALLEE, CALL_ARGS };

int tc_body_space(const tc_tok *t)
{
    if (t->kind != TK_IDENT || t->p[0] != '.')
        return -1;
    if (tc_tok_is(t, ".global"))
        return TC_SPACE_GLOBAL;
    if (tc_tok_is(t, ".const"))
        return TC_SPACE_CONST;
    if (tc_tok_is(t, ".shared"))
        return TC_SPACE_SHARED;
    if (tc_tok_is(t, ".local"))
        return TC_SPACE_LOCAL;
    if (tc_tok_is(t, ".tex"))
        return TC_SPACE_TEX;
    if (tc_tok_is(t, ".reg"))
        return TC_BODY_SPACE_REG;
    if (tc_tok_is(t, ".param"))
        return TC_BODY_SPACE_PARAM;
    return -1;
}

void tc_body_init(tc_body *w, const char *p, size_t n, uint32_t first_line)
{
    memset(w, 0, sizeof *w);
    tc_lex_init(&w->lx, p, n, first_line);
    w->at_start = 1;
}

void tc_body_free(tc_body *w)
{
    tc_map_free(&w->names);
    free(w->bind);
    free(w->block_base);
    memset(w, 0, sizeof *w);
}

static void new_statement(tc_body *w)
{
    w->at_start = 1;
    w->stmt = STMT_PLAIN;
    w->call = CALL_NONE;
    w->paren = w->nest = w->in_init = w->operand_braces = w->pred = 0;
    w->loc_line = 0;
}

/* Makes `t` name a new declaration in the innermost open block. */
static void bind(tc_body *w, const tc_tok *t, uint16_t space, tc_body_tok *out)
{
    out->role = TC_BODY_DECL;
    out->local = 1;
    out->space = space;
    out->decl = w->ndecls++;
    if (w->nbind == w->cap_bind) {
        size_t nc = w->cap_bind ? w->cap_bind * 2 : 32;
        tc_body_binding *b = realloc(w->bind, nc * sizeof *b);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->bind = b;
        w->cap_bind = nc;
    }
    tc_body_binding *b = &w->bind[w->nbind++];
    b->name = t->p;
    b->len = (uint32_t)t->len;
    b->decl = out->decl;
    b->space = space;
    uint32_t *v = tc_map_get(&w->names, t->p, t->len);
    b->outer = v ? *v : 0;
    if (v)
        *v = (uint32_t)w->nbind;
    else if (tc_map_put(&w->names, t->p, t->len, (uint32_t)w->nbind) < 0)
        w->oom = 1;
}

/* Tells whether identifier `t` names a declaration of the function. */
static void resolve(const tc_body *w, const tc_tok *t, tc_body_tok *out)
{
    uint32_t *v = tc_map_get(&w->names, t->p, t->len);
    if (v && *v) {
        const tc_body_binding *b = &w->bind[*v - 1];
        out->local = 1;
        out->space = b->space;
        out->decl = b->decl;
    }
}

static void open_block(tc_body *w)
{
    if ((size_t)w->depth + 1 >= w->cap_blocks) {
        size_t nc = w->cap_blocks ? w->cap_blocks * 2 : 16;
        uint32_t *b = realloc(w->block_base, nc * sizeof *b);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->block_base = b;
        w->cap_blocks = nc;
    }
    w->depth++;
    w->block_base[w->depth] = (uint32_t)w->nbind;
}

/* Ends the innermost block: its names go out of scope, uncovering the
 * names they hid. */
static void close_block(tc_body *w)
{
    uint32_t base = w->block_base[w->depth];
    while (w->nbind > base) {
        const tc_body_binding *b = &w->bind[--w->nbind];
        uint32_t *v = tc_map_get(&w->names, b->name, b->len);
        if (v)
            *v = b->outer;
    }
    w->depth--;
}

static int fail(tc_body *w, uint32_t line, const char *msg)
{
    w->err = msg;
    w->err_line = line;
    return -1;
}

/* A header token: parameter names (inside the parameter lists) are
 * declarations of the whole function. */
static int header_token(tc_body *w, const tc_tok *t, tc_body_tok *out)
{
    if (tc_tok_punct(t, '{') && w->nest == 0) {
        open_block(w);
        out->role = TC_BODY_OPEN;
        out->stmt_start = 1;
        new_statement(w);
        return w->oom ? -1 : 1;
    }
    if (tc_tok_punct(t, ';') && w->nest == 0) {
        out->role = TC_BODY_END;
        w->done = !w->in_init; /* else the end of a .pragma before the body */
        w->in_init = 0;
        return 1;
    }
    if (tc_tok_is(t, ".pragma") && w->nest == 0)
        w->in_init = 1;
    if (tc_tok_punct(t, '(') || tc_tok_punct(t, '['))
        w->nest++;
    else if ((tc_tok_punct(t, ')') || tc_tok_punct(t, ']')) && w->nest > 0)
        w->nest--;
    else if (t->kind == TK_IDENT && t->p[0] != '.' && w->nest == 1)
        bind(w, t, TC_BODY_SPACE_PARAM, out);
    return w->oom ? -1 : 1;
}

static int punct_token(tc_body *w, const tc_tok *t, tc_body_tok *out)
{
    char c = t->p[0];
    if (c == ':' && w->at_start) /* after a label: a statement may follow */
        return 1;
    out->stmt_start = (uint8_t)w->at_start;
    if ((c == '{' && !w->at_start) || (c == '}' && w->operand_braces)) {
        w->operand_braces += c == '{' ? 1 : -1;
        return 1;
    }
    if (c == '{') {
        open_block(w);
        out->role = TC_BODY_OPEN;
        new_statement(w);
        return w->oom ? -1 : 1;
    }
    if (c == '}') {
        close_block(w);
        out->role = TC_BODY_CLOSE;
        new_statement(w);
        w->done = w->depth == 0;
        return 1;
    }
    if (c == ';') {
        out->role = TC_BODY_END;
        out->stmt_start = 0;
        new_statement(w);
        return 1;
    }
    w->at_start = 0;
    if (c == '@' && out->stmt_start) {
        w->pred = 1;
        return 1;
    }
    if (w->call == CALL_START && c == '(') {
        w->call = CALL_RETLIST;
        w->paren = 1;
    } else if (w->call == CALL_RETLIST) {
        if (c == '(')
            w->paren++;
        else if (c == ')' && --w->paren == 0)
            w->call = CALL_AFTER_RET;
    } else if (w->call == CALL_AFTER_RET && c == ',') {
        w->call = CALL_CALLEE;
    }
    if (c == '(' || c == '[' || c == '<')
        w->nest++;
    else if ((c == ')' || c == ']' || c == '>') && w->nest > 0)
        w->nest--;
    else if (c == '=' && w->nest == 0)
        w->in_init = 1;
    else if (c == ',' && w->nest == 0 && !w->operand_braces)
        w->in_init = 0;
    return 1;
}

static int ident_token(tc_body *w, const tc_tok *t, tc_body_tok *out)
{
    if (w->pred) { /* the guard's predicate register; the opcode follows */
        w->pred = 0;
        out->role = TC_BODY_NAME;
        resolve(w, t, out);
        w->stmt = STMT_GUARDED;
        return 1;
    }
    if (w->at_start || w->stmt == STMT_GUARDED) {
        out->stmt_start = (uint8_t)w->at_start;
        if (w->at_start && t->p[0] != '.') {
            if (tc_lex_peek_punct(&w->lx, ':')) {
                out->role = TC_BODY_LABEL; /* the ':' comes next, still at_start */
                return 1;
            }
        }
        w->at_start = 0;
        out->role = TC_BODY_OPCODE;
        w->stmt = STMT_PLAIN;
        int space = tc_body_space(t);
        if (t->len >= 4 && !memcmp(t->p, "call", 4) && (t->len == 4 || t->p[4] == '.')) {
            w->stmt = STMT_CALL;
            w->call = CALL_START;
        } else if (tc_tok_is(t, ".loc")) {
            w->stmt = STMT_LOC;
            w->loc_line = t->line;
            w->after_function_name = 0;
        } else if (space >= 0) {
            w->stmt = STMT_DECL;
            w->decl_space = (uint16_t)space;
        }
        return 1;
    }
    if (t->p[0] == '.')
        return 1; /* a type, qualifier or other directive operand */
    if (w->stmt == STMT_DECL && w->nest == 0 && !w->in_init) {
        bind(w, t, w->decl_space, out);
        return w->oom ? -1 : 1;
    }
    if (w->stmt == STMT_CALL && (w->call == CALL_START || w->call == CALL_CALLEE)) {
        out->role = TC_BODY_CALLEE;
        w->call = CALL_ARGS;
    } else {
        out->role = TC_BODY_NAME;
    }
    resolve(w, t, out);
    return 1;
}

int tc_body_next(tc_body *w, tc_body_tok *out)
{
    if (w->done)
        return 0;
    memset(out, 0, sizeof *out);
    tc_lex_scan(&w->lx, &out->tok);
    const tc_tok *t = &out->tok;
    out->role = TC_BODY_OTHER;
    if (t->kind == TK_ERROR)
        return fail(w, t->line, w->lx.err);
    if (t->kind == TK_EOF)
        return fail(w, t->line, w->depth ? "function body is never closed"
                                         : "function has neither a body nor ';'");
    if (w->depth == 0) {
        out->role = TC_BODY_HEADER;
        return header_token(w, t, out);
    }
    if (w->loc_line && t->line != w->loc_line)
        new_statement(w); /* .loc ends with its line */
    if (t->kind == TK_PUNCT)
        return punct_token(w, t, out);
    if (t->kind == TK_IDENT) {
        int rc = ident_token(w, t, out);
        if (w->stmt == STMT_LOC && out->role != TC_BODY_OPCODE) {
            out->inlined = (uint8_t)w->after_function_name;
            w->after_function_name = tc_tok_is(t, "function_name");
        }
        return rc;
    }
    out->stmt_start = (uint8_t)w->at_start;
    w->at_start = 0;
    return 1;
}
