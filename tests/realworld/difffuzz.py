#!/usr/bin/env python3
"""difffuzz.py -- differential fuzzing of taskcache over the real-world corpus.

Each iteration takes a module of tests/realworld/corpus (cut to a few of its
kernels), applies one to three module-level mutations, and keeps the mutant
only if a whole-module `ptxas` accepts it. Then it checks what check.py
checks, plus an incremental build and key stability:

  * default (whole-program units) and --relocatable-units builds: cold, warm (module record hit)
    and --no-module-cache are byte-identical; an incremental build with a
    cache shared by all iterations equals the cold build;
  * every kernel and variable of the whole build is in the image, with as
    many objects of each variable;
  * slice keys (taskcache explain --json) of the kernels a mutation does not
    touch are those of the unmutated module: whitespace, comments, `.file`
    directives, reordering, removing or duplicating other kernels, another
    identical compiler-named constant (renumbering the later ones as nvcc
    would), or a `$__tc` name elsewhere must not change a key;
  * edits: a cache that holds the unmutated module's build, given the
    mutant, gives the mutant's cold image in every mode (default,
    relocatable, a unit per kernel): a key that misses what an edit changed
    would serve the old code here; and a kernel whose own text or a
    function it calls was edited gets another slice key.

Keys are read with --unit-cost 1, so that every kernel has a slice even in
a module small enough to be compiled whole by default.

Mutations: remove, duplicate or reorder kernels; move, remove or duplicate
helper .funcs; add a helper that several kernels call; add function-scope
.global / .shared variables to a helper; add a block whose `.local` variable
shadows a module-scope variable; put the address of a directly called helper
in a `.global` table; add comment lines, blank lines and whitespace inside
bodies; add an identical compiler-named constant; add a `.file` directive;
add an unused `$__tc...` variable; edit a number in a kernel, in a helper
.func or in a module variable's initializer; give a kernel `.maxnreg`;
make a module variable larger or more aligned.

A failing mutant is minimized (items removed while the same failure
remains, for at most --minimize-seconds) and saved, with what failed and
how to replay it, under --save (default /tmp/taskcache-difffuzz).

Usage:
  difffuzz.py --taskcache BIN [--seconds N] [--seed S]... [--save DIR]
  difffuzz.py --taskcache BIN --replay FILE.ptx     (check one saved input)

--seed may be repeated and may be 'time' (a seed derived from the clock,
printed); the time is split between the seeds. Exit 1 when a failure was
found, 2 on usage errors.
"""

import argparse
import fnmatch
import os
import random
import re
import sys
import tempfile
import time

import ptxitems
import rwlib

MAX_KERNELS = 4          # a base module is cut to at most this many kernels
MAX_BASE_BYTES = 3 << 20  # modules above this are cut before anything else


# --------------------------------------------------------------------------
# mutations: each takes (items, rng, state) and returns a description, or
# None when it does not apply. state["may_change"] collects the kernels whose
# keys the mutation may change ("ALL" for unknown), state["must_change"]
# those whose keys it must change (it edited what their slices hold).

def entries(items):
    return [i for i, it in enumerate(items) if it.kind == "entry" and it.is_definition]


def funcs(items):
    return [i for i, it in enumerate(items) if it.kind == "func" and it.is_definition]


def module_vars(items):
    return [it.name for it in items if it.kind in ("global", "const", "shared") and it.name]


def call_of(name):
    """A call instruction naming `name` as its callee."""
    return re.compile(r"\bcall(?:\.uni)?\b[^;]*?[\s,(]" + re.escape(name) + r"\s*[,;)]")


def callers(items, name):
    call = call_of(name)
    return [it.name for it in items if it.kind in ("entry", "func") and it.is_definition
            and it.name != name and call.search(it.text)]


def insert_in_body(text, snippet, rng, at_start=False):
    """Inserts snippet at a statement boundary of a function body."""
    span = ptxitems.body_span(text)
    if not span:
        return None
    start, end = span
    if at_start:
        pos = start
    else:
        cands = [m.end() for m in re.finditer(r";[ \t]*\n", text[start:end])]
        pos = start + (rng.choice(cands) if cands else 0)
    return text[:pos] + "\n" + snippet + "\n" + text[pos:]


def touch(state, kernel):
    """Records that the mutation may change this kernel's key."""
    if state["may_change"] != "ALL":
        state["may_change"].add(kernel)


def new_name(state, stem):
    state["counter"] += 1
    return f"tcfz_{stem}_{state['counter']}"


def m_remove_kernel(items, rng, state):
    e = entries(items)
    if len(e) < 2:
        return None
    i = rng.choice(e)
    name = items[i].name
    del items[i]
    state["removed"].add(name)
    return f"remove kernel {name}"


def m_duplicate_kernel(items, rng, state):
    e = entries(items)
    if not e:
        return None
    i = rng.choice(e)
    old = items[i].name
    new = new_name(state, "k")
    text = re.sub(r"(?<![\w$.%])" + re.escape(old) + r"(?=(_param_\d+)?(?![\w$.%]))", new, items[i].text)
    pos = rng.choice(e) + 1
    items.insert(pos, ptxitems.Item(text if text.endswith("\n") else text + "\n"))
    state["added"].add(new)
    return f"duplicate kernel {old} as {new}"


def m_reorder_kernels(items, rng, state):
    e = entries(items)
    if len(e) < 2:
        return None
    order = [items[i] for i in e]
    rng.shuffle(order)
    for slot, it in zip(e, order):
        items[slot] = it
    return "reorder kernels"


def m_move_func(items, rng, state):
    f = funcs(items)
    if not f:
        return None
    i = rng.choice(f)
    it = items.pop(i)
    items.append(ptxitems.Item("\n"))
    items.append(it)
    return f"move helper {it.name} to the end"


def m_remove_func(items, rng, state):
    f = [i for i in funcs(items) if not callers(items, items[i].name)]
    if not f:
        return None
    i = rng.choice(f)
    name = items[i].name
    del items[i]
    return f"remove unused helper {name}"


def m_duplicate_func(items, rng, state):
    f = [i for i in funcs(items) if [c for c in callers(items, items[i].name)]]
    if not f:
        return None
    i = rng.choice(f)
    old = items[i].name
    users = set(callers(items, old))
    if not any(it.kind == "entry" and it.name in users for it in items):
        return None
    new = new_name(state, "f")
    items.insert(i + 1, ptxitems.Item(ptxitems.rename(items[i].text, old, new)))
    j = rng.choice([k for k, it in enumerate(items) if it.kind == "entry" and it.name in users])
    items[j] = ptxitems.Item(ptxitems.rename(items[j].text, old, new))
    touch(state, items[j].name)
    return f"duplicate helper {old} as {new}, called by {items[j].name}"


def helper_text(name, body_decls="", body_ops=""):
    return (f"\n.func (.reg .b32 %tcfz_out) {name}()\n{{\n{body_decls}"
            f"\tmov.u32 %tcfz_out, 7;\n{body_ops}\tret;\n}}\n")


def first_code_index(items):
    """Index after the header directives and module-level declarations that
    precede the first function (where a new helper can go)."""
    for i, it in enumerate(items):
        if it.kind in ("entry", "func"):
            return i
    return len(items)


def m_add_helper(items, rng, state, decls="", ops=""):
    e = entries(items)
    if not e:
        return None
    name = new_name(state, "h")
    pos = first_code_index(items)
    items.insert(pos, ptxitems.Item(helper_text(name, decls, ops)))
    chosen = rng.sample(entries(items), min(len(entries(items)), rng.randint(2, 3)))
    for j in chosen:
        call = f"\t{{\n\t.reg .b32 %tcfz_r;\n\tcall.uni (%tcfz_r), {name}, ();\n\t}}"
        t = insert_in_body(items[j].text, call, rng)
        if t:
            items[j] = ptxitems.Item(t)
            touch(state, items[j].name)
    return name, [items[j].name for j in chosen]


def m_helper(items, rng, state):
    r = m_add_helper(items, rng, state)
    return r and f"add helper {r[0]} called by {', '.join(r[1])}"


def existing_helper(items, rng):
    """A helper with a body that at least one kernel calls, or None."""
    f = [i for i in funcs(items) if callers(items, items[i].name)]
    return rng.choice(f) if f else None


def m_func_global(items, rng, state, space="global"):
    """A function-scope .global (or .shared) in a helper: one object in the
    whole module however many units call the helper."""
    var = new_name(state, "g" if space == "global" else "s")
    r = "%" + var + "_r"
    decl = f"\t.{space} .align 4 .u32 {var};\n\t.reg .b32 {r}<2>;\n"
    op = (f"\tatom.global.add.u32 {r}0, [{var}], 1;\n" if space == "global" else
          f"\tld.shared.u32 {r}0, [{var}];\n\tadd.u32 {r}1, {r}0, 1;\n"
          f"\tst.shared.u32 [{var}], {r}1;\n")
    i = existing_helper(items, rng) if rng.random() < 0.6 else None
    if i is None:
        r = m_add_helper(items, rng, state, decl, op)
        return r and f"function-scope .{space} {var} in new helper {r[0]} called by {', '.join(r[1])}"
    t = insert_in_body(items[i].text, decl + op, rng, at_start=True)
    if not t:
        return None
    items[i] = ptxitems.Item(t)
    state["may_change"] = "ALL"
    return f"function-scope .{space} {var} in helper {items[i].name}"


def m_func_shared(items, rng, state):
    return m_func_global(items, rng, state, space="shared")


def m_shared_behind_pointer(items, rng, state):
    """A helper with a function-scope .shared word that kernels call
    directly and that an address-taken function also calls: still one word
    per block."""
    var = new_name(state, "s")
    r = "%" + var + "_r"
    decl = f"\t.shared .align 4 .u32 {var};\n\t.reg .b32 {r}<2>;\n"
    op = f"\tld.shared.u32 {r}0, [{var}];\n\tadd.u32 {r}1, {r}0, 1;\n\tst.shared.u32 [{var}], {r}1;\n"
    res = m_add_helper(items, rng, state, decl, op)
    if not res:
        return None
    helper = res[0]
    ptr, tab = new_name(state, "p"), new_name(state, "tab")
    pos = next(k for k, it in enumerate(items) if it.kind == "func" and it.name == helper) + 1
    items.insert(pos, ptxitems.Item(
        f"\n.func (.reg .b32 %tcfz_o) {ptr}()\n{{\n\t.reg .b32 %tcfz_t;\n"
        f"\tcall.uni (%tcfz_t), {helper}, ();\n\tmov.u32 %tcfz_o, %tcfz_t;\n\tret;\n}}\n"
        f"\n.global .align 8 .u64 {tab}[1] = {{{ptr}}};\n"))
    state["may_change"] = "ALL"
    return (f"function-scope .shared {var} in helper {helper} called by {', '.join(res[1])} "
            f"and by {ptr}, whose address is in {tab}")


def m_shadow(items, rng, state):
    names = [n for n in module_vars(items) if re.match(r"^[A-Za-z_$][\w$]*$", n)]
    fns = [i for i, it in enumerate(items) if it.kind in ("entry", "func") and it.is_definition]
    if not names or not fns:
        return None
    i = rng.choice(fns)
    used = [n for n in names if ptxitems.references(items[i].text, n)]
    name = rng.choice(used or names)
    block = (f"\t{{\n\t.local .align 4 .b8 {name}[4];\n\t.reg .b32 %tcfz_sh;\n"
             f"\tmov.u32 %tcfz_sh, 0;\n\tst.local.u32 [{name}], %tcfz_sh;\n\t}}")
    t = insert_in_body(items[i].text, block, rng)
    if not t:
        return None
    items[i] = ptxitems.Item(t)
    touch(state, items[i].name)
    if items[i].kind == "func":
        state["may_change"] = "ALL"
    return f"block with .local {name} shadowing the module-scope {name} in {items[i].name}"


def m_fnptr_table(items, rng, state):
    i = existing_helper(items, rng)
    if i is None:
        r = m_add_helper(items, rng, state)
        if not r:
            return None
        i = next(k for k, it in enumerate(items) if it.kind == "func" and it.name == r[0])
    name = items[i].name
    tab = new_name(state, "tab")
    items.insert(i + 1, ptxitems.Item(f"\n.global .align 8 .u64 {tab}[2] = {{{name}, 0}};\n"))
    state["may_change"] = "ALL"
    return f"table {tab} holds the address of helper {name} (called directly by {', '.join(callers(items, name))})"


def m_indirect_call(items, rng, state):
    """A new helper that kernels call directly, its address in a .global or
    .const table, and a new kernel that calls it through the table: the
    shape of issue 9, item 3."""
    res = m_add_helper(items, rng, state)
    if not res:
        return None
    helper = res[0]
    space = rng.choice(["global", "const"])
    tab, kern = new_name(state, "itab"), new_name(state, "icall")
    pos = next(k for k, it in enumerate(items) if it.kind == "func" and it.name == helper) + 1
    items.insert(pos, ptxitems.Item(f"\n.{space} .align 8 .u64 {tab}[2] = {{{helper}, {helper}}};\n"))
    items.append(ptxitems.Item(
        f"\n.visible .entry {kern}(.param .u64 out)\n{{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<3>;\n"
        f"\tld.{space}.u64 %rd1, [{tab}+8];\n\t{{\n\t.reg .b32 %tcfz_ret;\n"
        f"\t$tcfz_proto: .callprototype (.reg .b32 _) _ ();\n"
        f"\tcall (%tcfz_ret), %rd1, (), $tcfz_proto;\n\tmov.u32 %r1, %tcfz_ret;\n\t}}\n"
        f"\tld.param.u64 %rd2, [out];\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}}\n"))
    state["may_change"] = "ALL"
    return (f"helper {helper} called by {', '.join(res[1])} and through .{space} table {tab} "
            f"by new kernel {kern}")


def m_alias(items, rng, state):
    """An .alias of a helper, which one kernel calls instead."""
    f = [i for i in funcs(items) if [c for c in callers(items, items[i].name)]
         and not items[i].text.lstrip().startswith(".weak")]
    if not f:
        return None
    i = rng.choice(f)
    name = items[i].name
    users = set(callers(items, name))
    kernels = [k for k, it in enumerate(items) if it.kind == "entry" and it.name in users]
    if not kernels:
        return None
    alias = new_name(state, "alias")
    items.insert(i + 1, ptxitems.Item(f"\n.alias {alias}, {name};\n"))
    j = rng.choice([k for k, it in enumerate(items) if it.kind == "entry" and it.name in users])
    items[j] = ptxitems.Item(ptxitems.rename(items[j].text, name, alias))
    touch(state, items[j].name)
    return f".alias {alias} of helper {name}, called by {items[j].name}"


def m_param_like_global(items, rng, state):
    """A kernel parameter renamed to the name of a module-scope variable."""
    names = [n for n in module_vars(items) if re.match(r"^[A-Za-z_][\w$]*$", n)]
    e = entries(items)
    if not names or not e:
        return None
    i = rng.choice(e)
    params = re.findall(r"\.param\s+[^,)]*?\s([\w$]+)\s*(?:\[\d+\])?\s*[,)]", items[i].text.split("{", 1)[0])
    if not params:
        return None
    p = rng.choice(params)
    name = rng.choice(names)
    if ptxitems.references(items[i].text, name):
        return None
    items[i] = ptxitems.Item(ptxitems.rename(items[i].text, p, name))
    touch(state, items[i].name)
    return f"parameter {p} of {items[i].name} renamed to module-scope {name}"


def m_weak(items, rng, state):
    """A .visible kernel, helper or variable made .weak."""
    cands = [i for i, it in enumerate(items) if it.kind in ("entry", "func", "global")
             and re.match(r"^\s*\.visible\b", it.text)]
    if not cands:
        return None
    i = rng.choice(cands)
    items[i] = ptxitems.Item(re.sub(r"^(\s*)\.visible\b", r"\1.weak", items[i].text, count=1))
    state["may_change"] = "ALL"
    return f"{items[i].name} made .weak"


def m_whitespace(items, rng, state):
    fns = [i for i, it in enumerate(items) if it.kind in ("entry", "func") and it.is_definition]
    if not fns:
        return None
    done = []
    for i in rng.sample(fns, min(len(fns), rng.randint(1, 3))):
        t = items[i].text
        span = ptxitems.body_span(t)
        if not span:
            continue
        head, body, tail = t[:span[0]], t[span[0]:span[1]], t[span[1]:]
        kind = rng.choice(["comment", "blank", "spaces", "brackets", "indent", "block_comment", "header"])
        lines = body.split("\n")
        if kind == "comment":
            k = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
            lines.insert(k, "\t// tcfz comment line")
            body = "\n".join(lines)
        elif kind == "blank":
            k = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
            lines.insert(k, "")
            lines.insert(k, "   ")
            body = "\n".join(lines)
        elif kind == "spaces":
            body = "\n".join(re.sub(r",\s*", lambda m: " , ", ln) if not ln.lstrip().startswith(("//", ".loc", ".file"))
                             else ln for ln in lines)
        elif kind == "brackets":
            body = "\n".join(re.sub(r"\[([^\[\]\n]*)\]", r"[ \1 ]", ln)
                             if not ln.lstrip().startswith(("//", ".loc", ".file")) else ln for ln in lines)
        elif kind == "indent":
            body = "\n".join(("  " + ln.lstrip("\t") + "  ") if ln.strip() and not ln.lstrip().startswith("//")
                             else ln for ln in lines)
        elif kind == "block_comment":
            body = "\n".join(re.sub(r";\s*$", "; /* tcfz */", ln, count=1) if rng.random() < 0.2 else ln
                             for ln in lines)
        elif kind == "header":
            head = re.sub(r"\(\s*", "(\n\t", head, count=1).replace(",\n", " ,\n  ")
        items[i] = ptxitems.Item(head + body + tail)
        done.append(f"{kind} in {items[i].name}")
    return "whitespace/comments: " + "; ".join(done) if done else None


def m_dup_internal_constant(items, rng, state):
    """A compiler-named constant added before the others and numbered
    first, the others renumbered, as nvcc numbers a new string that comes
    earlier in the source. Its contents are new (then no key may change)
    or, less often, equal to an existing one: nvcc merges equal strings, and
    docs/design.md says the kernels using the repeated constant may then get
    other keys."""
    def family(n):
        if n == "$str" or re.match(r"^\$str\$\d+$", n):
            return "$str"
        if re.match(r"^__unnamed_\d+$", n):
            return "__unnamed_"
        return None
    cands = [i for i, it in enumerate(items) if it.kind in ("global", "const") and it.name and family(it.name)
             and "=" in it.text]
    if not cands:
        return None
    src = items[rng.choice(cands)]
    fam = family(src.name)
    members = [it.name for it in items if it.kind in ("global", "const") and it.name and family(it.name) == fam]

    def index(n):
        if fam == "$str":
            return 0 if n == "$str" else int(n.split("$")[-1])
        return int(n[len("__unnamed_"):])

    def name_at(k):
        if fam == "$str":
            return "$str" if k == 0 else f"$str${k}"
        return f"__unnamed_{k}"
    members.sort(key=index)
    lo = index(members[0])
    mapping = {n: name_at(index(n) + 1) for n in members}
    for k, it in enumerate(items):
        t = it.text
        if any(n in t for n in members):
            t = re.sub(r"(?<![\w$.%])(" + "|".join(re.escape(n) for n in members) + r")(?![\w$.%])",
                       lambda m: mapping[m.group(1)], t)
            items[k] = ptxitems.Item(t)
    copy = ptxitems.rename(src.text, src.name, name_at(lo))
    equal = rng.random() < 0.25
    if not equal:   # other contents: the first byte becomes another letter
        copy = re.sub(r"=\s*\{\s*(\d+)", lambda m: "= {" + str(33 + (int(m.group(1)) + 1) % 90), copy, count=1)
    else:
        for it in items:
            if it.kind == "entry" and ptxitems.references(it.text, mapping[src.name]):
                touch(state, it.name)
    first = min(k for k, it in enumerate(items) if it.kind in ("global", "const") and it.name and
                family(it.name) == fam)
    items.insert(first, ptxitems.Item(copy))
    return (f"{'identical' if equal else 'new'} constant like {src.name} added first as {name_at(lo)}, "
            "the others renumbered")


def m_file_directive(items, rng, state):
    pos = rng.choice([i for i, it in enumerate(items) if it.kind not in ("version", "target")] or [len(items)])
    if pos < first_code_index(items) and any(it.kind == "address_size" for it in items[pos:]):
        pos = max(i for i, it in enumerate(items) if it.kind == "address_size") + 1
    state["counter"] += 1
    items.insert(pos, ptxitems.Item(f'\t.file\t{900 + state["counter"]} "/tmp/tcfz/added_by_difffuzz.cu"\n'))
    return ".file directive added"


def m_nul_end(items, rng, state):
    """The text ends in a NUL and whatever a JIT's buffer held after it, as
    the driver is handed it (Quadrants' dumps end in "\\0"): the driver
    reads up to the NUL, so must taskcache, keys included."""
    junk = rng.choice(["", "\n", "garbage .entry x() { }\n", "\0\0\n"])
    items.append(ptxitems.Item("\0" + junk))
    return f"NUL at the end, then {junk!r}"


def m_tc_name(items, rng, state):
    pos = first_code_index(items)
    items.insert(pos, ptxitems.Item(f".global .align 4 .u32 $__tc{new_name(state, 'x')};\n"))
    return "unused variable named $__tc..."


def reach(name, step):
    """Every name step leads to from `name`, and on from those; None when
    step returns None for one of them (the walk is given up)."""
    seen, todo = set(), [name]
    while todo:
        following = step(todo.pop())
        if following is None:
            return None
        for n in following:
            if n not in seen and n != name:
                seen.add(n)
                todo.append(n)
    return seen


def referrers(items, name):
    """Names of the kernels, functions and variables whose text names
    `name`, directly or through one another: all an edit of it can reach."""
    return reach(name, lambda n: [it.name for it in items if it.name and it.is_definition and
                                  it.name != n and ptxitems.references(it.text, n)])


def called_only(items, name):
    """Whether `name` is only ever called (its address taken nowhere): then
    every caller's slice holds its text."""
    call = call_of(name)
    for it in items:
        if it.name != name and ptxitems.references(it.text, name) and \
                (it.kind not in ("entry", "func") or ptxitems.references(call.sub("", it.text), name)):
            return False
    return True


def callers_through_calls(items, name):
    """Kernels and functions that call `name` directly or through calls to
    functions that do, when no function on the way has its address taken
    (None otherwise: a caller may then reach it through the module data)."""
    return reach(name, lambda n: callers(items, n) if called_only(items, n) else None)


def edit_function(items, rng, state, indices):
    sites = {i: ptxitems.immediate_sites(items[i].text) for i in indices}
    cands = [i for i in indices if sites[i]]
    if not cands:
        return None
    i = rng.choice(cands)
    it = items[i]
    text, old = ptxitems.bumped(it.text, rng.choice(sites[i]))
    items[i] = ptxitems.Item(text)
    for k in referrers(items, it.name) | {it.name}:
        touch(state, k)
    callers_of = callers_through_calls(items, it.name)
    state["must_change"] |= {it.name} | (callers_of or set())
    return f"edit {it.kind} {it.name}: an immediate {old} changed"


def m_edit_kernel(items, rng, state):
    return edit_function(items, rng, state, entries(items))


def m_edit_helper(items, rng, state):
    return edit_function(items, rng, state, funcs(items))


def m_edit_initializer(items, rng, state):
    number = re.compile(r"(?<![\w.$%])\d+(?![\w.])")
    cands = [i for i, it in enumerate(items) if it.kind in ("global", "const") and it.is_definition and
             it.name and "=" in it.text and number.search(it.text.split("=", 1)[1])]
    if not cands:
        return None
    i = rng.choice(cands)
    it = items[i]
    eq = it.text.index("=") + 1
    m = rng.choice(list(number.finditer(it.text, eq)))
    byte = re.search(r"\.[bsu]8\b", it.text[:eq])  # a value must fit its type
    text, old = ptxitems.bumped(it.text, m.span(), limit=126 if byte else (1 << 31) - 2)
    items[i] = ptxitems.Item(text)
    for k in referrers(items, it.name):
        touch(state, k)
    return f"edit variable {it.name}: a number of its initializer {old} changed"


def m_edit_variable_shape(items, rng, state):
    """A module variable made larger or more aligned: its users' code may
    address it otherwise (and .shared ones lay out a block's memory)."""
    cands = [i for i, it in enumerate(items) if it.kind in ("global", "const", "shared") and
             it.is_definition and it.name and re.search(r"\.align\s+\d+|\[\d+\]", it.text.split("=", 1)[0])]
    if not cands:
        return None
    i = rng.choice(cands)
    it = items[i]
    head, eq, tail = it.text.partition("=")
    dims = list(re.finditer(r"\[(\d+)\]", head))
    if dims and (rng.random() < 0.5 or ".align" not in head):
        m = rng.choice(dims)
        head = head[:m.start(1)] + str(int(m.group(1)) + 4) + head[m.end(1):]
        what = "4 elements more"
    else:
        head = re.sub(r"\.align\s+(\d+)", lambda m: f".align {min(int(m.group(1)) * 2, 256)}", head, count=1)
        what = "twice the alignment"
    items[i] = ptxitems.Item(head + eq + tail)
    for k in referrers(items, it.name):
        touch(state, k)
    return f"variable {it.name}: {what}"


def m_maxnreg(items, rng, state):
    cands = [i for i in entries(items) if ".maxnreg" not in items[i].text]
    if not cands:
        return None
    i = rng.choice(cands)
    it = items[i]
    brace = ptxitems.body_span(it.text)[0] - 1
    n = rng.choice((32, 64, 128))
    items[i] = ptxitems.Item(it.text[:brace] + f".maxnreg {n}\n" + it.text[brace:])
    touch(state, it.name)
    state["must_change"].add(it.name)
    return f"kernel {it.name} given .maxnreg {n}"


# kind: "stable" (keys of untouched kernels must not change) or "free"
MUTATIONS = [
    (m_remove_kernel, "stable"), (m_duplicate_kernel, "stable"), (m_reorder_kernels, "stable"),
    (m_move_func, "stable"), (m_remove_func, "stable"), (m_duplicate_func, "stable"),
    (m_helper, "stable"), (m_func_global, "free"), (m_func_shared, "free"),
    (m_shared_behind_pointer, "free"), (m_shadow, "free"),
    (m_fnptr_table, "free"), (m_whitespace, "stable"), (m_whitespace, "stable"),
    (m_dup_internal_constant, "stable"), (m_file_directive, "stable"), (m_tc_name, "stable"),
    (m_nul_end, "stable"), (m_indirect_call, "free"), (m_alias, "stable"),
    (m_param_like_global, "stable"), (m_weak, "free"),
    (m_edit_kernel, "stable"), (m_edit_helper, "stable"), (m_edit_initializer, "stable"),
    (m_maxnreg, "stable"), (m_edit_variable_shape, "stable"),
]

# the modes a mutant is built in (all of check.py's), and the option that
# gives every kernel a slice key
CHECK_MODES = rwlib.MODES
PER_KERNEL = rwlib.MODES["unit1"]


# --------------------------------------------------------------------------
# bases, checks, minimization

def cut(text, rng, limit=MAX_KERNELS):
    items = ptxitems.split(text)
    e = entries(items)
    if len(e) <= limit:
        return items
    keep = set(rng.sample(e, limit))
    return [it for k, it in enumerate(items) if k in keep or not (it.kind == "entry" and it.is_definition)]


def ptxas_accepts(path, arch):
    with tempfile.TemporaryDirectory() as d:
        p = rwlib.run([rwlib.PTXAS, f"-arch={arch}", rwlib.driver_text(path, d), "-o", os.devnull])
    return p.returncode == 0


def key_failures(keys, base_keys, may_change, must_change):
    fails = []
    if may_change != "ALL":
        changed = sorted(k for k in keys if k in base_keys and k not in may_change and keys[k] != base_keys[k])
        if changed:
            fails.append(f"slice key changed for {len(changed)} untouched kernel(s): {changed[:3]}")
    same = sorted(k for k in must_change if k in keys and k in base_keys and keys[k] == base_keys[k])
    if same:
        fails.append(f"slice key kept by {len(same)} kernel(s) whose slice the mutation edited: {same[:3]}")
    return fails


def check_mutant(binary, path, work, shared_cache, base_keys, may_change, must_change=(), base_path=None):
    """Invariant failures of one mutant (strings)."""
    os.makedirs(work, exist_ok=True)
    with open(path, "rb") as f:
        arch = rwlib.arch_of(f.read())
    res = rwlib.check_module(binary, path, work, jobs=1, modes=CHECK_MODES,
                             tiers={"default": ("cold", "warm", "nomodule"),
                                    "reloc": ("cold", "warm", "nomodule"),
                                    "unit1": ("cold", "nomodule")},
                             want_resources=False)
    fails = list(res["failures"])
    if res["skipped"]:
        return [f"whole-module ptxas failed: {res['skipped']}"]
    cold = os.path.join(work, "default.cold.cubin")
    inc = os.path.join(work, "incremental.cubin")
    tc = rwlib.Taskcache(binary, shared_cache, arch, 1)
    try:
        tc.build(path, inc)
        if os.path.exists(cold) and not rwlib.same_bytes(cold, inc):
            fails.append("incremental build (cache shared with earlier mutants) differs from the cold build")
    except rwlib.BuildError as e:
        fails.append(f"incremental build: {e}")
    if base_path:
        fails += rwlib.edit_failures(binary, base_path, path, work, arch, CHECK_MODES, cold_images=True)
    if base_keys is not None:
        try:
            keys = tc.slice_keys(path, *PER_KERNEL)
        except rwlib.BuildError as e:
            fails.append(f"explain: {e}")
            keys = {}
        fails += key_failures(keys, base_keys, may_change, must_change)
    return fails


def signature(fail):
    """A failure message without the build mode that showed it, numbers,
    names of mutants or paths, first line only: two failures with the same
    signature are taken to be the same defect."""
    s = fail.splitlines()[0] if fail else ""
    s = re.sub(r"^(default|reloc|unit1|incremental build)( \w+)?: ", "", s)
    s = re.sub(r"^taskcache build .*?exited \d+: ", "build failed: ", s)
    s = re.sub(r"\S*\.ptx:\d+: ", "", s)
    s = re.sub(r"tcfz_\w+", "X", s)
    s = re.sub(r"/\S+", "PATH", s)
    s = re.sub(r"\[[^\]]*\]", "[...]", s)
    return re.sub(r"\d+", "N", s)[:160]


def quick_failures(binary, path, work, key_check, cand_items):
    """The cheapest check that can show a failure again: a whole build, one
    taskcache --no-cache build in each mode and, when asked, the keys."""
    os.makedirs(work, exist_ok=True)
    with open(path, "rb") as f:
        arch = rwlib.arch_of(f.read())
    whole = os.path.join(work, "whole.cubin")
    ref = rwlib.driver_text(path, work)
    try:
        rwlib.whole_build(ref, whole, arch)
    except rwlib.BuildError as e:
        return [f"whole-module ptxas failed: {e}"]
    fails = []
    refs = rwlib.References(ref, work, arch)
    tc = rwlib.Taskcache(binary, os.path.join(work, "cache"), arch, 1)
    for mode, extra in (("default", []), ("reloc", ["--relocatable-units"])):
        out = os.path.join(work, f"{mode}.cubin")
        try:
            tc.build(path, out, *extra, cache=False)
            fails += rwlib.symbol_failures(whole, out, mode, refs.relocatable, refs.alone)
        except rwlib.BuildError as e:
            fails.append(f"{mode} cold: {e}")
    base_keys, may_change, must_change = key_check(cand_items)
    if base_keys is not None:
        fails += key_failures(tc.slice_keys(path, *PER_KERNEL), base_keys, may_change, must_change)
    return fails


def minimize(binary, items, fail_sig, work, arch, deadline, key_check):
    """Removes chunks of items (halves first, then smaller) while a failure
    with the same signature remains; returns the smallest items found."""
    def still_fails(cand):
        path = os.path.join(work, "min.ptx")
        with open(path, "w") as f:
            f.write(ptxitems.join(cand))
        if not ptxas_accepts(path, arch):
            return False
        d = rwlib.mktemp_dir("min-", work)
        try:
            fails = quick_failures(binary, path, d, key_check, cand)
        except rwlib.BuildError:
            return False
        finally:
            rwlib.rmtree(d)
        return any(signature(f) == fail_sig for f in fails)

    fixed = {"version", "target", "address_size"}
    chunk = max(1, len(items) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        k = len(items) - chunk
        removed = False
        while k >= 0 and time.monotonic() < deadline:
            part = items[k:k + chunk]
            if not any(it.kind in fixed for it in part):
                cand = items[:k] + items[k + chunk:]
                if still_fails(cand):
                    items = cand
                    removed = True
            k -= chunk
        if not removed:
            chunk //= 2
    # then lines of function bodies, the same way
    for idx in range(len(items)):
        if items[idx].kind not in ("entry", "func") or not items[idx].is_definition:
            continue
        text = items[idx].text
        span = ptxitems.body_span(text)
        if not span:
            continue
        head, lines, tail = text[:span[0]], text[span[0]:span[1]].split("\n"), text[span[1]:]
        chunk = max(1, len(lines) // 2)
        while chunk >= 1 and time.monotonic() < deadline:
            k = len(lines) - chunk
            removed = False
            while k >= 0 and time.monotonic() < deadline:
                cand_lines = lines[:k] + lines[k + chunk:]
                cand = items[:idx] + [ptxitems.Item(head + "\n".join(cand_lines) + tail)] + items[idx + 1:]
                if still_fails(cand):
                    lines, items = cand_lines, cand
                    removed = True
                k -= chunk
            if not removed:
                chunk //= 2
    return items


class Fuzzer:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.binary = os.path.abspath(args.taskcache)
        self.shared_cache = os.path.join(work, "shared-cache")
        self.bases = [m for m in rwlib.stored_modules()
                      if not args.only or any(fnmatch.fnmatch(m.label, g) for g in args.only)]
        if not self.bases:
            raise SystemExit("difffuzz: no base module matches --only")
        self.found = {}          # signature -> saved path
        self.iterations = self.accepted = self.rejected = 0

    def run_seed(self, seed, seconds):
        rng = random.Random(seed)
        deadline = time.monotonic() + seconds
        it = 0
        while time.monotonic() < deadline:
            it += 1
            self.iteration(rng, seed, it, deadline)

    def iteration(self, rng, seed, it, deadline):
        self.iterations += 1
        module = rng.choice(self.bases)
        text = module.text().split(b"\0")[0].decode("utf-8", "replace")
        arch = rwlib.arch_of(text.encode())
        base_items = cut(text, rng)
        items = list(base_items)
        state = {"counter": 0, "may_change": set(), "must_change": set(), "removed": set(), "added": set()}
        done = []
        for _ in range(1 if rng.random() < 0.5 else rng.randint(2, 3)):
            fn, kind = rng.choice(MUTATIONS)
            d = fn(items, rng, state)
            if d:
                done.append(d)
                if kind == "free":
                    state["may_change"] = "ALL"
        if not done:
            return
        # what follows a NUL is not read: keep the NUL mutation's item last
        items = [it for it in items if not it.text.startswith("\0")] + \
                [it for it in items if it.text.startswith("\0")][:1]
        d = rwlib.mktemp_dir(f"it{it}-", self.work)
        try:
            base_path = os.path.join(d, "base.ptx")
            mut_path = os.path.join(d, "mutant.ptx")
            with open(base_path, "w") as f:
                f.write(ptxitems.join(base_items))
            with open(mut_path, "w") as f:
                f.write(ptxitems.join(items))
            if not ptxas_accepts(mut_path, arch):
                self.rejected += 1
                return
            self.accepted += 1
            tc = rwlib.Taskcache(self.binary, os.path.join(d, "explain-cache"), arch, 1)
            try:
                base_keys = tc.slice_keys(base_path, *PER_KERNEL)
            except rwlib.BuildError:
                base_keys = None
            fails = check_mutant(self.binary, mut_path, os.path.join(d, "check"), self.shared_cache,
                                 base_keys, state["may_change"], state["must_change"], base_path)
            if fails:
                self.report(module, seed, it, done, fails, items, base_items, arch, d, state, deadline)
        finally:
            rwlib.rmtree(d)

    def report(self, module, seed, it, done, fails, items, base_items, arch, d, state, deadline):
        new = [f for f in fails if signature(f) not in self.found]
        print(f"FAIL seed {seed} iteration {it}: {module.label} + {' + '.join(done)}")
        for f in fails:
            print("     " + f.replace("\n", "\n       "))
        if not new:
            print("     (already saved)")
            return
        sig = signature(new[0])
        bt = ptxitems.join(base_items)

        base_keys = None
        tc = rwlib.Taskcache(self.binary, os.path.join(d, "k"), arch, 1)
        p = os.path.join(d, "kb.ptx")
        with open(p, "w") as f:
            f.write(bt)
        try:
            base_keys = tc.slice_keys(p, *PER_KERNEL)
        except rwlib.BuildError:
            pass

        def key_check(cand):
            if base_keys is None:
                return None, "ALL", ()
            return base_keys, state["may_change"], state["must_change"]
        small = items
        # an edit's failure needs the base module built first, which
        # minimizing the mutant alone cannot keep: saved as it is
        if self.args.minimize_seconds > 0 and "after the unedited module" not in sig:
            small = minimize(self.binary, list(items), sig,
                             d, arch, min(deadline + self.args.minimize_seconds,
                                          time.monotonic() + self.args.minimize_seconds), key_check)
        os.makedirs(self.args.save, exist_ok=True)
        stem = os.path.join(self.args.save, f"seed{seed}-it{it}")
        with open(stem + ".ptx", "w") as f:
            f.write(ptxitems.join(small))
        with open(stem + ".base.ptx", "w") as f:
            f.write(bt)
        with open(stem + ".txt", "w") as f:
            f.write(f"module: {module.label}\nmutations:\n" + "".join(f"  {x}\n" for x in done) +
                    "failures:\n" + "".join(f"  {x}\n" for x in fails))
        for f in new:
            self.found.setdefault(signature(f), stem + ".ptx")
        print(f"     saved {stem}.ptx ({'minimized, ' if small is not items else ''}"
              f"{len(ptxitems.join(small))} bytes; base: {stem}.base.ptx)")
        print(f"     replay: {sys.argv[0]} --taskcache {self.args.taskcache} --replay {stem}.ptx")


def replay(args):
    path = args.replay
    work = rwlib.mktemp_dir("taskcache-difffuzz-replay-")
    try:
        with open(path, "rb") as f:
            arch = rwlib.arch_of(f.read())
        if not ptxas_accepts(path, arch):
            print(f"{path}: ptxas rejects it")
            return 2
        base = re.sub(r"\.ptx$", ".base.ptx", path)
        have_base = os.path.exists(base) and base != path
        fails = check_mutant(os.path.abspath(args.taskcache), path, os.path.join(work, "check"),
                             os.path.join(work, "shared"), None, "ALL",
                             base_path=base if have_base else None)
        if have_base:
            tc = rwlib.Taskcache(os.path.abspath(args.taskcache), os.path.join(work, "k"), arch, 1)
            try:
                kb, km = tc.slice_keys(base, *PER_KERNEL), tc.slice_keys(path, *PER_KERNEL)
                changed = sorted(k for k in km if k in kb and kb[k] != km[k])
                if changed:
                    print(f"note: {len(changed)} kernel(s) have other keys than in {base} "
                          f"(expected only for kernels the mutation touched): {changed[:5]}")
            except rwlib.BuildError as e:
                fails.append(f"explain: {e}")
        for f in fails:
            print(f"FAIL {f}")
        print(f"{path}: {'FAIL' if fails else 'PASS'}")
        return 1 if fails else 0
    finally:
        rwlib.rmtree(work)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskcache", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", action="append", default=[])
    ap.add_argument("--save", default="/tmp/taskcache-difffuzz")
    ap.add_argument("--minimize-seconds", type=float, default=30)
    ap.add_argument("--replay")
    ap.add_argument("--only", action="append", default=[],
                    help="use only modules whose GENERATOR/NAME matches this glob as bases (repeatable)")
    ap.add_argument("--mutations", help="comma-separated subset of: " +
                    ", ".join(sorted({f.__name__[2:] for f, _ in MUTATIONS})))
    args = ap.parse_args(argv)
    if not os.access(args.taskcache, os.X_OK):
        ap.error(f"{args.taskcache} is not an executable")
    if not rwlib.PTXAS:
        ap.error("ptxas not found")
    if args.replay:
        return replay(args)
    if args.mutations:
        wanted = set(args.mutations.split(","))
        unknown = wanted - {f.__name__[2:] for f, _ in MUTATIONS}
        if unknown:
            ap.error(f"unknown mutation(s) {sorted(unknown)}")
        MUTATIONS[:] = [(f, k) for f, k in MUTATIONS if f.__name__[2:] in wanted]
    seeds = []
    for s in args.seed or ["1"]:
        seeds.append(int(time.time() * 1000) % 1000000007 if s == "time" else int(s))
    work = rwlib.mktemp_dir("taskcache-difffuzz-")
    fz = Fuzzer(args, work)
    t0 = time.monotonic()
    try:
        for s in seeds:
            print(f"== difffuzz: seed {s}, {args.seconds / len(seeds):.0f} s "
                  f"(reproduce: difffuzz.py --taskcache BIN --seed {s} --seconds {args.seconds / len(seeds):.0f})",
                  flush=True)
            fz.run_seed(s, args.seconds / len(seeds))
    finally:
        rwlib.rmtree(work)
    print(f"== difffuzz: {fz.iterations} iterations, {fz.accepted} mutants checked, {fz.rejected} rejected by "
          f"ptxas, {len(fz.found)} distinct failures; {time.monotonic() - t0:.0f} s")
    for sig, path in sorted(fz.found.items()):
        print(f"   {sig}\n      {path}")
    return 1 if fz.found else 0


if __name__ == "__main__":
    sys.exit(main())
