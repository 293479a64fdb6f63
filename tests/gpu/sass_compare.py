#!/usr/bin/env python3
"""sass_compare.py -- does taskcache produce the same machine code as ptxas?

Builds three images of one PTX module and compares every kernel's SASS:

  A  taskcache build --no-cache --relocatable-units  (per-kernel slices, linked)
  B  ptxas -arch=ARCH IN              (whole module, whole program)
  C  ptxas -arch=ARCH -c IN + nvlink  (whole module, relocatable)

With --extra-taskcache-args --whole-program-units (taskcache's default
where libnvJitLink is found), A has -ewp units instead and C
is the whole module as one -ewp unit (taskcache --whole-program-units
--unit-cost 1000000000): the linkable build A is made like.

Each image is disassembled (nvdisasm, else cuobjdump -sass) and cut into
functions. A kernel is compared as its own code ("body") and, separately,
the code of every function it calls directly or transitively ("callees",
matched by name: whole-program ptxas names its private copies
`$kernel$helper` and its math subroutines `$__internal_N_$name`, taskcache's
image holds one internal copy per unit, which nvdisasm shows as `name__N`).

Before comparing, instructions are normalized so that only differences that
matter remain: addresses, encodings and comments are dropped; branch targets
become instruction indexes within the function; call targets become the
callee's base name and CALL.ABS/CALL.REL, RET.ABS/RET.REL become CALL/RET;
return-address materialization (`MOV R20, 32@lo((f + .L@srel))` or the
whole-program `MOV R8, 0x1d0`) becomes RETADDR.LO/HI; constant-bank operands
that point at module variables become symbolic (`c[0x3][c_params+0x10]`,
`c[0x4][&g_table]`); compiler-named constants ($str, __unnamed_1,
taskcache's $__tcA...) are named by a hash of their contents; the padding
after a function's last instruction is removed.

Classes, per kernel and comparison (A vs B, A vs C, C vs B):
  identical  the normalized code (body and every callee) is the same
  regs       identical up to a consistent, bijective renaming of registers
             (R, UR, P, UP, B) within each function
  different  anything else; an explanation in words is computed (instruction
             count delta, opcode multiset difference, and which kinds of
             instructions the differences are confined to)

Usage:
  sass_compare.py --ptx MODULE.ptx [--taskcache build/taskcache] [--arch sm_90]
                  [--nvdisasm PATH] [--cuobjdump PATH] [--json OUT.json]
                  [--report OUT.txt] [--workdir DIR] [--ptxas-args "ARGS"]
                  [--extra-taskcache-args ARGS...]

--extra-taskcache-args takes every remaining argument (or one quoted string).
Exit status: 0 on success (whatever the classification), 1 when a build or
the disassembly failed, 2 on usage errors.

Python 3 standard library only.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from cuda_tools import find_tool  # noqa: E402  (scripts/cuda_tools.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLASSES = ("identical", "regs", "different")
SEVERITY = {c: i for i, c in enumerate(CLASSES)}
COMPARISONS = (("A", "B"), ("A", "C"), ("C", "B"))
IMAGE_DESC = {
    "A": "taskcache (per-kernel slices, linked)",
    "B": "whole-module ptxas (whole program)",
    "C": "whole-module ptxas -c + nvlink (relocatable)",
}


class ToolError(Exception):
    pass


# --------------------------------------------------------------------------
# tools

def run_cmd(args, what, env=None):
    t0 = time.monotonic()
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise ToolError(f"{what} failed (exit {p.returncode}): {' '.join(map(str, args))}\n"
                        f"{p.stdout[-4000:]}{p.stderr[-4000:]}")
    return p, dt


# --------------------------------------------------------------------------
# ELF (cubin) reader: sections, symbols, relocations

class Elf:
    SHT_SYMTAB, SHT_RELA, SHT_REL, SHT_NOBITS = 2, 4, 9, 8
    SHF_EXECINSTR = 0x4

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = d = f.read()
        if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] != 1:
            raise ToolError(f"{path}: not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        self.sections = []
        for i in range(shnum):
            (name, typ, flags, addr, off, size, link, info, align,
             entsize) = struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize)
            self.sections.append(dict(index=i, name_off=name, type=typ, flags=flags,
                                      offset=off, size=size, link=link, info=info,
                                      entsize=entsize))
        strtab = self.sections[shstrndx]
        for s in self.sections:
            s["name"] = self._str(strtab, s["name_off"])
        self.by_name = {}
        for s in self.sections:
            self.by_name.setdefault(s["name"], s)
        # symbols
        self.symbols = []
        for s in self.sections:
            if s["type"] != self.SHT_SYMTAB:
                continue
            names = self.sections[s["link"]]
            for k in range(s["size"] // 24):
                (nm, info, other, shndx, value,
                 size) = struct.unpack_from("<IBBHQQ", d, s["offset"] + 24 * k)
                self.symbols.append(dict(index=k, name=self._str(names, nm), type=info & 0xF,
                                         bind=info >> 4, other=other, shndx=shndx,
                                         value=value, size=size))
            break
        # relocations: target section index -> {offset: (symbol, type, addend)}
        self.relocs = collections.defaultdict(dict)
        for s in self.sections:
            if s["type"] not in (self.SHT_RELA, self.SHT_REL):
                continue
            ent = 24 if s["type"] == self.SHT_RELA else 16
            for k in range(s["size"] // ent):
                if ent == 24:
                    off, info, addend = struct.unpack_from("<QQq", d, s["offset"] + ent * k)
                else:
                    (off, info), addend = struct.unpack_from("<QQ", d, s["offset"] + ent * k), 0
                symi, typ = info >> 32, info & 0xFFFFFFFF
                sym = self.symbols[symi] if symi < len(self.symbols) else None
                self.relocs[s["info"]][off] = (sym, typ, addend)

    @staticmethod
    def _strz(d, pos):
        end = d.index(b"\0", pos)
        return d[pos:end].decode("utf-8", "replace")

    def _str(self, sec, off):
        return self._strz(self.data, sec["offset"] + off)

    def section_bytes(self, idx, off, size):
        s = self.sections[idx]
        if s["type"] == self.SHT_NOBITS:
            return b"\0" * size
        return self.data[s["offset"] + off: s["offset"] + off + size]

    EIATTR = {0x2F: "regcount", 0x11: "frame_size"}

    def function_info(self):
        """{symbol name: {"regcount": n, "frame_size": n}} from .nv.info
        (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE)."""
        out = collections.defaultdict(dict)
        for s in self.sections:
            if not s["name"].startswith(".nv.info") or s["type"] == self.SHT_NOBITS:
                continue
            d = self.data[s["offset"]: s["offset"] + s["size"]]
            p = 0
            while p + 4 <= len(d):
                fmt, attr, size = struct.unpack_from("<BBH", d, p)
                if fmt != 4:          # EIFMT_NVAL/BVAL/HVAL: 4 bytes in all
                    p += 4
                    continue
                if attr in self.EIATTR and size == 8:
                    si, v = struct.unpack_from("<II", d, p + 4)
                    if si < len(self.symbols):
                        out[self.symbols[si]["name"]][self.EIATTR[attr]] = v
                p += 4 + size
        return out

    def binding(self):
        """{function symbol name: LOCAL/GLOBAL/WEAK}."""
        names = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK"}
        return {s["name"]: names.get(s["bind"], str(s["bind"]))
                for s in self.symbols if s["type"] == 2}

    def kernels(self):
        """Names of the kernels (FUNC symbols marked STO_CUDA_ENTRY)."""
        return sorted({s["name"] for s in self.symbols if s["type"] == 2 and s["other"] & 0x10})


# --------------------------------------------------------------------------
# disassembly -> functions

class Function:
    def __init__(self, name, section, start):
        self.name = name          # unique name in this image (as the disassembler prints it)
        self.orig = name          # symbol name in the ELF (nvdisasm renames duplicates)
        self.section = section
        self.start = start
        self.instrs = []          # [(addr, text)]
        self.is_kernel = False
        self.base = name          # name used to match copies across images
        self.norm = None          # normalized instruction strings
        self.callees = set()      # unique names of directly called functions
        self.binding = "LOCAL"    # LOCAL, GLOBAL or WEAK
        self.indirect_calls = 0


INSTR_RE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*$")
LABEL_RE = re.compile(r"^([^\s/\"][^\s:]*):\s*$")
TRAIL_COMMENT_RE = re.compile(r"\s*/\*.*?\*/\s*$")


def clean_instr_text(t):
    while True:
        t2 = TRAIL_COMMENT_RE.sub("", t)
        if t2 == t:
            break
        t = t2
    t = t.strip()
    if t.endswith(";"):
        t = t[:-1].rstrip()
    return t


def parse_nvdisasm(text):
    """Returns (functions by unique name, labels {label: (section, addr)},
    kernels set, {section: end address})."""
    funcs = {}
    declared, kernels, mapnames, binding, sized = set(), set(), {}, {}, set()
    labels = {}
    sec_end = {}
    sec = None
    pending = []          # labels waiting for the next instruction's address
    cur = None
    last_addr = None

    def flush():
        if sec is not None:
            end = last_addr + 16 if last_addr is not None else 0
            sec_end[sec] = end
            for lb in pending:
                labels[lb] = (sec, end)
        pending.clear()

    for line in text.splitlines():
        if line.startswith("//----"):
            flush()
            name = line.strip("/- \t")
            sec = name if name.startswith(".text") else None
            cur, last_addr = None, None
            continue
        if sec is None:
            continue
        m = INSTR_RE.match(line)
        if m:
            addr = int(m.group(1), 16)
            # several function symbols at one address are aliases: one
            # function (the one with a .size), the others stay labels
            starts = [lb for lb in pending if lb in declared]
            if starts:
                lb = ([x for x in starts if x in sized] or starts)[-1]
                cur = funcs[lb] = Function(lb, sec, addr)
            for lb in pending:
                labels[lb] = (sec, addr)
            pending.clear()
            if cur is not None:
                cur.instrs.append((addr, clean_instr_text(m.group(2))))
            last_addr = addr
            continue
        s = line.strip()
        if s.startswith(".section"):
            # `.section NAME,"ax",@progbits`: the header and this agree
            continue
        if s.startswith(".type") and s.endswith("@function"):
            declared.add(s.split()[1].rsplit(",", 1)[0])
        elif s.startswith(".size") and len(s.split()) >= 2:
            sized.add(s.split()[1].rsplit(",", 1)[0])
        elif s.startswith((".global", ".weak")) and len(s.split()) == 2:
            binding[s.split()[1]] = "GLOBAL" if s.startswith(".global") else "WEAK"
        elif s.startswith(".other") and "STO_CUDA_ENTRY" in s:
            kernels.add(s.split()[1].rsplit(",", 1)[0])
        elif s.startswith(".map_symbolname"):
            parts = s.split()
            if len(parts) == 3:
                mapnames[parts[1]] = parts[2]
        else:
            m = LABEL_RE.match(s)
            if m:
                pending.append(m.group(1))
    flush()
    for f in funcs.values():
        f.orig = mapnames.get(f.name, f.name)
        f.is_kernel = f.name in kernels
        f.binding = binding.get(f.name, "LOCAL")
    return funcs, labels, kernels, sec_end


# cuobjdump -sass prints one block per code section ("Function : NAME"),
# numeric branch targets and 0x0 where relocations apply. Function
# boundaries, call targets and relocated symbols come from the ELF.

RELOC_LO = {0x38}   # R_CUDA_ABS32_LO_32 (seen as 32@lo(...) in nvdisasm)
RELOC_HI = {0x39}   # R_CUDA_ABS32_HI_32
BRANCH_OPS = ("BRA", "BSSY", "CALL.REL", "JMP", "SSY", "PBK", "PCNT", "LEPC", "BREAK")


def parse_cuobjdump(text, elf):
    blocks = []   # [(name, [(addr, text)])]
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Function :"):
            blocks.append((s.split(":", 1)[1].strip(), []))
            continue
        m = INSTR_RE.match(line)
        if m and blocks:
            blocks[-1][1].append((int(m.group(1), 16), clean_instr_text(m.group(2))))
    code = [s for s in elf.sections if s["flags"] & Elf.SHF_EXECINSTR and s["size"] > 0]
    if len(code) != len(blocks):
        raise ToolError(f"cuobjdump printed {len(blocks)} functions, the ELF has "
                        f"{len(code)} code sections")
    # unique names for duplicated symbols (several internal copies of a helper)
    fsyms = [s for s in elf.symbols if s["type"] == 2 and s["shndx"] < len(elf.sections)]
    counts = collections.Counter(s["name"] for s in fsyms)
    uname = {}
    for s in fsyms:
        uname[s["index"]] = s["name"] if counts[s["name"]] == 1 else f"{s['name']}__{s['index']}"
    funcs, kernels, sec_end = {}, set(), {}
    aliases = {}
    for sec, (bname, instrs) in zip(code, blocks):
        secname = f"{sec['name']}.s{sec['index']}"   # copies share names
        bname = re.sub(r"__\d+$", "", bname) if bname not in secname else bname
        if not secname.endswith(bname) and bname not in secname:
            raise ToolError(f"cuobjdump block {bname} does not match section {secname}")
        sec_end[secname] = sec["size"]
        mine = sorted((s for s in fsyms if s["shndx"] == sec["index"]), key=lambda s: s["value"])
        starts = {}
        for s in sorted(mine, key=lambda y: (y["value"], y["size"] == 0)):
            starts.setdefault(s["value"], s)
        for s in mine:
            if starts[s["value"]] is not s:        # an alias
                aliases[uname[s["index"]]] = (secname, s["value"])
        relocs = elf.relocs.get(sec["index"], {})
        by_addr = {a: t for a, t in instrs}
        cur = None
        for addr, t in instrs:
            if addr in starts:
                s = starts[addr]
                cur = funcs[uname[s["index"]]] = Function(uname[s["index"]], secname, addr)
                cur.orig = s["name"]
                cur.binding = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK"}.get(s["bind"], str(s["bind"]))
                cur.is_kernel = bool(s["other"] & 0x10)
                if cur.is_kernel:
                    kernels.add(cur.name)
            if cur is None:
                continue
            t = _symbolize_cuobjdump(t, addr, secname, relocs.get(addr), uname, by_addr)
            cur.instrs.append((addr, t))
    return funcs, _CuoLabels(aliases), kernels, sec_end


def _symbolize_cuobjdump(t, addr, secname, reloc, uname, by_addr):
    """Rewrites one cuobjdump instruction into nvdisasm's symbolic syntax."""
    pred, op, args = split_instr(t)
    # numeric code targets -> labels
    if op.startswith(BRANCH_OPS) and not op.startswith("CALL.ABS"):
        def lab(m):
            return f"`(.L_s_{int(m.group(1), 16):x})"
        args = re.sub(r"(?<![\w.\[+])(0x[0-9a-f]+)\s*$", lab, args)
    if reloc is not None:
        sym, typ, addend = reloc
        name = uname.get(sym["index"], sym["name"]) if sym else "?"
        if op.startswith("CALL"):
            args = re.sub(r"0x[0-9a-f]+\s*$", f"`({name})", args).strip()
        elif typ in RELOC_LO or typ in RELOC_HI:
            half = "lo" if typ in RELOC_LO else "hi"
            if sym and sym["type"] in (2, 3) and (sym["type"] == 3 or addend):
                target = f"(({name} + .L_s_{sym['value'] + addend:x}@srel))"
            else:
                target = f"({name}+0x{addend:x})" if addend else f"({name})"
            args = re.sub(r"0x[0-9a-f]+\s*$", f"32@{half}{target}", args)
    args = args.replace(".L_s_", f".L_s_{secname}_")
    return join_instr(pred, op, args)


def disassemble(path, tools, elf):
    nvd = tools.get("nvdisasm")
    if nvd:
        p, _ = run_cmd([nvd, "-c", path], "nvdisasm")
        out = p.stdout
        if "//----" not in out:
            p, _ = run_cmd([nvd, "-c", "-ndf", path], "nvdisasm -ndf")
            out = p.stdout
        funcs, labels, kernels, sec_end = parse_nvdisasm(out)
        return funcs, labels, kernels, sec_end, out
    cuo = tools.get("cuobjdump")
    if cuo:
        p, _ = run_cmd([cuo, "-sass", path], "cuobjdump -sass")
        out = p.stdout
        funcs, labels, kernels, sec_end = parse_cuobjdump(out, elf)
        return funcs, labels, kernels, sec_end, out
    raise ToolError("neither nvdisasm nor cuobjdump was found")


class _CuoLabels(dict):
    """Label lookup for cuobjdump output: .L_s_<section>_<hex address>."""
    def get(self, key, default=None):
        if key in self:
            return self[key]
        m = re.match(r"^\.L_s_(.*)_([0-9a-f]+)$", key)
        if not m:
            return default
        return (m.group(1), int(m.group(2), 16))


# --------------------------------------------------------------------------
# normalization

def split_instr(t):
    pred = ""
    m = re.match(r"^(@!?\S+)\s+(.*)$", t)
    if m:
        pred, t = m.group(1), m.group(2)
    parts = t.split(None, 1)
    op = parts[0] if parts else ""
    args = parts[1] if len(parts) > 1 else ""
    args = re.sub(r"\s*,\s*", ", ", args.strip())
    args = re.sub(r"\s+", " ", args)
    return pred, op, args


def join_instr(pred, op, args):
    return " ".join(x for x in (pred, op, args) if x)


# internal variables that taskcache renames after their contents ($str,
# $str$1, LLVM's __unnamed_1, any other `$` name): compared by content
CONST_NAME_RE = re.compile(r"^(\$|__unnamed_\d)")
MOVE_OPS = ("MOV", "IMAD.MOV.U32", "IMAD.MOV", "UMOV")


class Normalizer:
    """Per image: symbolizes constant banks and data symbols, names callees."""

    def __init__(self, label, elf, funcs, labels, kernels, sec_end):
        self.label = label
        self.elf = elf
        self.funcs = funcs
        self.labels = labels
        self.kernels = kernels
        self.sec_end = sec_end
        self.func_by_addr = {(f.section, f.start): f for f in funcs.values()}
        self.sec_funcs = collections.defaultdict(list)
        for f in funcs.values():
            self.sec_funcs[f.section].append(f)
        for lst in self.sec_funcs.values():
            lst.sort(key=lambda f: f.start)
        self.func_end = {}
        for sec, lst in self.sec_funcs.items():
            for i, f in enumerate(lst):
                self.func_end[f.name] = lst[i + 1].start if i + 1 < len(lst) else sec_end.get(sec, 0)
        self.orig_names = {f.orig for f in funcs.values()}
        self._const_names = {}
        self._banks = {}
        self._bank_relocs = {}
        for s in elf.sections:
            m = re.match(r"^\.nv\.constant(\d+)$", s["name"])
            if m:
                bank = int(m.group(1))
                syms = sorted((y for y in elf.symbols
                               if y["shndx"] == s["index"] and y["type"] == 1),
                              key=lambda y: y["value"])
                self._banks[bank] = syms
                self._bank_relocs[bank] = elf.relocs.get(s["index"], {})
        # data symbols by name, for constants named by content
        self.data_syms = {}
        for y in elf.symbols:
            if y["type"] == 1 and y["shndx"] < len(elf.sections):
                self.data_syms.setdefault(y["name"], y)
        for f in funcs.values():
            f.base = self.base_name(f)
        self._bank0 = self._kernel_bank0_relocs()

    def _kernel_bank0_relocs(self):
        """Relocations into each kernel's parameter bank (.nv.constant0.K:
        texture/surface/sampler handles of module-level references), as seen
        by every function the kernel reaches: {function: {offset: symbol}}."""
        per_kernel = {}
        for s in self.elf.sections:
            if s["name"].startswith(".nv.constant0."):
                rel = self.elf.relocs.get(s["index"])
                if rel:
                    per_kernel[s["name"][len(".nv.constant0."):]] = {
                        off: r[0]["name"] for off, r in rel.items() if r[0] is not None}
        out = {}
        if not per_kernel:
            return out
        calls = {}
        for f in self.funcs.values():
            calls[f.name] = {m for _, t in f.instrs if t.split(None, 2)[0:1] != [] and "CALL" in t
                             for m in re.findall(r"`\(([^)]*)\)", t) if m in self.funcs}
        for f in self.funcs.values():
            if not f.is_kernel or f.orig not in per_kernel:
                continue
            seen, todo = {f.name}, [f.name]
            while todo:
                n = todo.pop()
                out.setdefault(n, {}).update(per_kernel[f.orig])
                for c in calls.get(n, ()):
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
        return out

    # names ------------------------------------------------------------------
    def base_name(self, f):
        o = f.orig
        m = re.match(r"^\$__internal_\d+_\$(.+)$", o)
        if m:
            return m.group(1)
        if o.startswith("$"):
            owner = self.sec_funcs.get(f.section, [None])[0]
            if owner is not None and owner is not f and o.startswith("$" + owner.orig + "$"):
                return o[len(owner.orig) + 2:]
            # copies of a kernel's callee in a section that holds several kernels
            for k in self.kernels:
                if o.startswith("$" + k + "$"):
                    return o[len(k) + 2:]
        return o

    def canon_symbol(self, name):
        """Data symbol -> name to compare; function -> its base name."""
        f = self.funcs.get(name)
        if f is not None:
            return f.base
        if CONST_NAME_RE.match(name):
            got = self._const_names.get(name)
            if got is None:
                y = self.data_syms.get(name)
                if y is not None:
                    data = self.elf.section_bytes(y["shndx"], y["value"], y["size"])
                    got = "$const#" + hashlib.sha256(data).hexdigest()[:12]
                else:
                    got = name          # not a variable of this image: keep the name
                self._const_names[name] = got
            return got
        return name

    def bank_operand(self, bank, inner, f=None):
        """c[bank][inner] with inner like 0x1ac, R2+0x10, RZ, UR4."""
        m = re.match(r"^(?:(U?R\w*)(?:\s*\+\s*)?)?(-?0x[0-9a-f]+)?$", inner.strip())
        if not m:
            return None
        reg, off = m.group(1), m.group(2)
        if reg in ("RZ", "URZ"):
            reg = None
        offv = int(off, 16) if off else 0
        if bank == 0:
            sym = self._bank0.get(f.name, {}).get(offv) if f is not None and reg is None else None
            return f"c[0x0][<&{self.canon_symbol(sym)}>]" if sym else None
        if reg is None:
            rel = self._bank_relocs.get(bank, {}).get(offv)
            if rel is not None and rel[0] is not None:
                sym, _, addend = rel
                nm = self.canon_symbol(sym["name"])
                return f"c[0x{bank:x}][<&{nm}>{'+0x%x' % addend if addend else ''}]"
        syms = self._banks.get(bank)
        if not syms:
            return None
        best = None
        for y in syms:
            if y["value"] <= offv and (offv < y["value"] + max(y["size"], 1)):
                best = y
        if best is None:
            return None
        d = offv - best["value"]
        s = f"<{self.canon_symbol(best['name'])}>" + (f"+0x{d:x}" if d else "")
        return f"c[0x{bank:x}][{reg + '+' if reg else ''}{s}]"

    # one function -----------------------------------------------------------
    def normalize(self, f):
        ins = list(f.instrs)
        # padding: trailing NOPs, then the `BRA self` after the last EXIT/RET
        while ins and ins[-1][1] == "NOP":
            ins.pop()
        if ins:
            a, t = ins[-1]
            _, op, args = split_instr(t)
            if op == "BRA" and self._label_target(args, f) == (f.section, a):
                ins.pop()
        f.instrs_kept = ins
        index = {a: i for i, (a, _) in enumerate(ins)}
        calls_at = {a for a, t in ins if split_instr(t)[1].startswith("CALL")}
        parsed = [split_instr(t) for _, t in ins]
        # return-address registers: whole-program `MOV Rn, <addr after CALL>`
        # and its `MOV R(n+1), 0x0`
        retaddr = {}
        for i, (pred, op, args) in enumerate(parsed):
            if op in MOVE_OPS and "@srel" in args:
                m = re.match(r"^(U?R\d+), 32@(lo|hi)\(\((\S+) \+ (\.L\S+?)@srel\)\)$", args)
                if m:
                    tgt = self.labels.get(m.group(4))
                    if tgt and tgt[0] == f.section and (tgt[1] - 16) in calls_at:
                        retaddr[i] = ("RETADDR." + m.group(2).upper(), m.group(1))
                continue
            if op in MOVE_OPS and not pred:
                m = re.match(r"^(R\d+), (?:RZ, RZ, )?(0x[0-9a-f]+)$", args)
                if m:
                    v = int(m.group(2), 16)
                    if v - 16 in calls_at and index.get(v - 16, -1) > i \
                            and index[v - 16] - i < 40:
                        retaddr[i] = ("RETADDR.LO", m.group(1))
                        hi = "R%d" % (int(m.group(1)[1:]) + 1)
                        for j in range(max(0, i - 8), index[v - 16]):
                            pj = parsed[j]
                            if pj[1] in MOVE_OPS and not pj[0] and re.match(
                                    r"^%s, (?:RZ, RZ, )?0x0$" % hi, pj[2]):
                                retaddr[j] = ("RETADDR.HI", hi)
                                break
        out = []
        f.callees = set()
        f.indirect_calls = 0
        for i, (pred, op, args) in enumerate(parsed):
            if i in retaddr:
                out.append(join_instr(pred, retaddr[i][0], retaddr[i][1]))
                continue
            op2 = op
            if op.startswith("CALL") or op.startswith("RET"):
                op2 = re.sub(r"\.(ABS|REL)(?=\.|$)", "", op)
            if op.startswith("RET"):
                # RET.REL.NODEC R20 `(kernel) / RET.ABS.NODEC R20 0x0
                args = re.sub(r"\s*(`\([^)]*\)|0x[0-9a-f]+)$", "", args)
            elif op.startswith("CALL"):
                m = re.match(r"^(U?R\d+)?\s*(?:`\(([^)]*)\)|0x[0-9a-f]+)?$", args)
                if m and m.group(1):
                    f.indirect_calls += 1
                    args = m.group(1)        # indirect: drop the relocation base
                elif m and m.group(2) and self._call_target(m.group(2)):
                    g = self._call_target(m.group(2))
                    f.callees.add(g.name)
                    args = f"<F:{g.base}>"
                else:
                    args = self._norm_args(args, f, index)
            else:
                args = self._norm_args(args, f, index)
            out.append(join_instr(pred, op2, args))
        f.norm = out
        return out

    def _call_target(self, name):
        """A CALL operand (function name, or a label at a function's start)."""
        if name in self.funcs:
            return self.funcs[name]
        t = self.labels.get(name)
        return self.func_by_addr.get(t) if t else None

    def _label_target(self, args, f):
        m = re.search(r"`\(([^)]*)\)", args)
        if m:
            return self.labels.get(m.group(1))
        return None

    def _code_ref(self, name, f, index):
        """A label -> L<index within f> or <F:base>+<index>."""
        t = self.labels.get(name)
        if t is None:
            return None
        sec, addr = t
        if sec == f.section and f.start <= addr <= self.func_end.get(f.name, addr):
            return "L%d" % ((addr - f.start) // 16)
        for g in self.sec_funcs.get(sec, []):
            if g.start <= addr < self.func_end.get(g.name, g.start):
                return "<F:%s>+%d" % (g.base, (addr - g.start) // 16)
        return "L?"

    def _norm_args(self, args, f, index):
        def backtick(m):
            inner = m.group(1)
            if inner in self.funcs:
                return f"`(<F:{self.funcs[inner].base}>)"
            r = self._code_ref(inner, f, index)
            return f"`({r})" if r else m.group(0)

        args = re.sub(r"`\(([^)]*)\)", backtick, args)

        def reloc(m):
            half, inner = m.group(1), m.group(2).strip()
            while inner.startswith("(") and inner.endswith(")"):
                inner = inner[1:-1].strip()
            parts = [p.strip() for p in inner.split("+")]
            outp = []
            for p in parts:
                if p.endswith("@srel"):
                    r = self._code_ref(p[:-5], f, index)
                    outp.append(r or p)
                elif re.match(r"^-?(0x[0-9a-f]+|\d+)$", p):
                    outp.append(p)
                elif p in self.funcs:
                    # `sym + .L@srel` is section-relative: keep the label part
                    if any(q.endswith("@srel") for q in parts):
                        continue
                    outp.append(f"<F:{self.funcs[p].base}>")
                else:
                    outp.append(f"<D:{self.canon_symbol(p)}>")
            return f"32@{half}({'+'.join(outp)})"

        args = re.sub(r"32@(lo|hi)\((.*?\)?)\)(?=,|$| )", reloc, args)

        def bank(m):
            r = self.bank_operand(int(m.group(1), 16), m.group(2), f)
            return r if r else m.group(0)

        args = re.sub(r"c\[(0x[0-9a-f]+)\]\[([^\]]*)\]", bank, args)

        # any other label (BRX's BRANCH_TARGETS list, jump tables)
        def label(m):
            r = self._code_ref(m.group(0), f, index)
            return r if r else m.group(0)

        args = re.sub(r"(?<![\w.$])\.L_[sx]_[\w.$]+", label, args)
        return args


# --------------------------------------------------------------------------
# comparison

REG_RE = re.compile(r"(?<![\w.$])(UR\d+|UP\d+|R\d+|P\d+|B\d+)(?![\w$])")


def reg_template(s):
    """(template with register classes, [registers]); <...> stays literal."""
    regs, out = [], []
    for k, part in enumerate(re.split(r"(<[^>]*>)", s)):
        if k % 2:
            out.append(part)
            continue

        def rep(m):
            regs.append(m.group(1))
            return "%" + re.match(r"[A-Z]+", m.group(1)).group(0)

        out.append(REG_RE.sub(rep, part))
    return "".join(out), regs


def loose(tmpl):
    """Class-agnostic form used to align sequences: any register is %."""
    return re.sub(r"%[A-Z]+", "%", tmpl).replace(".reuse", "")


def opcode(s):
    _, op, _ = split_instr(s)
    return op


def category(s):
    """What kind of instruction s is, for explaining differences."""
    pred, op, args = split_instr(s)
    if op.startswith(("CALL", "RET", "RETADDR")):
        return "calls"
    if "c[0x4][<&" in args or re.search(r"32@(lo|hi)\(<D:", args):
        return "global addresses"
    if op in ("STL", "LDL", "STL.64", "LDL.64", "STL.128", "LDL.128") and "[R1" in args:
        return "stack save/restore"
    if re.match(r"^R1, R1, ", args) and op in ("VIADD", "IADD3", "IMAD.IADD", "IADD"):
        return "stack save/restore"
    if op.startswith("BMOV"):
        return "stack save/restore"
    if re.search(r"c\[0x[1-9a-f]\]\[[^\]]*<", args):
        return "constant-bank variables"
    if any(int(m, 16) >= 0x210 for m in re.findall(r"c\[0x0\]\[(?:U?R\w*\+)?(0x[0-9a-f]+)\]", args)):
        return "kernel parameters"
    if op in MOVE_OPS or op == "HFMA2.MMA" or op == "CS2R" or op.startswith("IMAD.MOV") \
            or (op == "IMAD.U32" and ", RZ, RZ, " in args):
        return "moves"
    if op.split(".")[0] in ("BSSY", "BSYNC", "WARPSYNC", "BRA", "BREAK", "BRX", "JMP", "JMX",
                            "BPT", "NOP", "EXIT", "YIELD"):
        return "control flow"
    return "other"


def compare_seq(a, b):
    """Compares two normalized instruction lists. Returns a dict with
    'class' and, when not identical, details and an explanation."""
    res = {"class": "identical", "n": [len(a), len(b)]}
    if a == b:
        return res
    ta = [reg_template(x) for x in a]
    tb = [reg_template(x) for x in b]
    if len(a) == len(b) and all(x[0] == y[0] for x, y in zip(ta, tb)):
        fwd, rev, ok = {}, {}, True
        for (_, ra), (_, rb) in zip(ta, tb):
            for x, y in zip(ra, rb):
                if fwd.setdefault(x, y) != y or rev.setdefault(y, x) != x:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            res["class"] = "regs"
            res["renamed"] = sum(1 for x, y in fwd.items() if x != y)
            return res
        res["class"] = "different"
        res["kind"] = "regalloc"
        res["explanation"] = ("same instructions in the same order, but registers differ "
                              "in a way that is not a consistent renaming (register allocation)")
        res["categories"] = ["register allocation"]
        return res
    res["class"] = "different"
    la = [loose(x[0]) for x in ta]
    lb = [loose(x[0]) for x in tb]
    d = len(a) - len(b)
    words = []
    if d:
        words.append(f"{len(a)} vs {len(b)} instructions ({d:+d})")
    else:
        words.append(f"{len(a)} instructions each")
    oa = collections.Counter(opcode(x) for x in a)
    ob = collections.Counter(opcode(x) for x in b)
    plus, minus = oa - ob, ob - oa
    res["opcodes_plus"] = dict(plus)
    res["opcodes_minus"] = dict(minus)
    ma, mb = collections.Counter(la), collections.Counter(lb)
    if ma == mb:
        res["kind"] = "scheduling"
        res["categories"] = ["scheduling"]
        words.append("same instructions in a different order (scheduling/register allocation only)")
        res["explanation"] = "; ".join(words)
        return res
    # instructions present on one side only (anywhere in the function); the
    # rest merely moved
    only_a, only_b = ma - mb, mb - ma
    rest_a = take(only_a, la, a)
    rest_b = take(only_b, lb, b)
    # equivalent encodings (VIADD = IADD3 .., RZ; MOV = IMAD.MOV.U32 RZ, RZ, ..),
    # then the same with predicate polarity ignored
    rest_a, rest_b, n_equiv = match_by(rest_a, rest_b, equivalent)
    rest_a, rest_b, n_pol = match_by(rest_a, rest_b, lambda k: polarity_free(equivalent(k)))
    rest_a, rest_b, n_imm = match_by(rest_a, rest_b, lambda k: re.sub(
        r"(?<![\w.])-?0x[0-9a-f]+", "#", equivalent(k)))
    moved = sum((ma & mb).values()) - sum(1 for x, y in zip(la, lb) if x == y)
    cats = collections.Counter()
    other_ops = collections.Counter()
    examples = []
    for rest, sign in ((rest_a, "+"), (rest_b, "-")):
        for k, orig in rest:
            c = category(orig)
            cats[c] += 1
            if c == "other":
                other_ops[sign + opcode(k)] += 1
                if len(examples) < 40:
                    examples.append(sign + k)
    ra, rb = rest_a, rest_b
    res["other_examples"] = examples
    if n_equiv:
        cats["equivalent forms"] += n_equiv
    if n_pol:
        cats["inverted predicates"] += n_pol
    if n_imm:
        cats["immediate values"] += n_imm
    order = ["calls", "stack save/restore", "global addresses", "constant-bank variables",
             "kernel parameters", "moves", "control flow", "equivalent forms",
             "inverted predicates", "immediate values", "other"]
    real = sorted(cats, key=lambda c: order.index(c) if c in order else 99)
    res["categories"] = real
    res["diff_categories"] = dict(cats)
    res["only_in_first"] = len(ra)
    res["only_in_second"] = len(rb)
    opdiff = " ".join([f"+{k}x{v}" for k, v in sorted(plus.items(), key=lambda kv: -kv[1])[:6]] +
                      [f"-{k}x{v}" for k, v in sorted(minus.items(), key=lambda kv: -kv[1])[:6]])
    if opdiff:
        words.append("opcodes " + opdiff)
    if real == ["equivalent forms"]:
        words.append(f"only equivalent encodings differ ({n_equiv}: "
                     + equivalent_summary(only_a, only_b) + ")"
                     + ("; plus reordering" if moved else ""))
    elif "other" not in real:
        words.append("differences confined to " + ", ".join(
            f"{c} ({cats[c]})" for c in real) + ("; plus reordering" if moved else ""))
    else:
        desc = ", ".join(f"{c} ({cats[c]})" for c in real if c != "other")
        words.append("differences in " + (desc + " and " if desc else "") + "other code: "
                     + " ".join(f"{k}x{v}" for k, v in other_ops.most_common(8)))
        # where the same opcode is on both sides, show the operands
        same_op = {k[1:] for k in other_ops}
        same_op = {o for o in same_op if "+" + o in other_ops and "-" + o in other_ops}
        shown = [e for e in examples if opcode(e[1:]) in same_op][:4]
        if shown:
            words.append("e.g. " + " | ".join(shown))
    if n_imm:
        words.append("immediate operands differ in %d instruction pairs (values fixed at link "
                     "time without a relocation, such as .shared variable offsets, or constants)"
                     % n_imm)
    res["explanation"] = "; ".join(words)
    return res


def take(counts, loose_list, orig_list):
    """The (loose, original) instructions counted in counts, first ones first."""
    left = collections.Counter(counts)
    out = []
    for k, o in zip(loose_list, orig_list):
        if left[k] > 0:
            left[k] -= 1
            out.append((k, o))
    return out


def match_by(rest_a, rest_b, keyfn):
    """Pairs instructions of both sides whose keyfn(loose form) agree.
    Returns the unpaired ones of each side and the number of pairs."""
    kb = collections.Counter(keyfn(k) for k, _ in rest_b)
    ka = collections.Counter(keyfn(k) for k, _ in rest_a)
    common = ka & kb
    n = sum(common.values())
    ca, cb = collections.Counter(common), collections.Counter(common)
    out_a, out_b = [], []
    for k, o in rest_a:
        key = keyfn(k)
        if ca[key] > 0:
            ca[key] -= 1
        else:
            out_a.append((k, o))
    for k, o in rest_b:
        key = keyfn(k)
        if cb[key] > 0:
            cb[key] -= 1
        else:
            out_b.append((k, o))
    return out_a, out_b, n


CMP_PAIRS = {"LT": "GEU", "GT": "LEU", "LE": "GTU", "GE": "LTU", "EQ": "NEU", "NE": "EQU",
             "NUM": "NAN"}


def polarity_free(eq):
    """Drops predicate negations and maps each comparison to one member of
    its complementary pair (FSETP.LT ~ FSETP.GEU, ISETP.LT ~ ISETP.GE)."""
    pred, op, args = split_instr(eq)
    pred = pred.replace("!", "")
    args = args.replace("!", "")
    parts = op.split(".")
    if parts[0] in ("FSETP", "DSETP", "HSETP2") and len(parts) > 1:
        c = parts[1]
        inv = {v: k for k, v in CMP_PAIRS.items()}
        parts[1] = min(c, CMP_PAIRS.get(c) or inv.get(c) or c)
    elif parts[0] in ("ISETP", "UISETP") and len(parts) > 1:
        ipairs = {"LT": "GE", "GE": "LT", "GT": "LE", "LE": "GT", "EQ": "NE", "NE": "EQ"}
        parts[1] = min(parts[1], ipairs.get(parts[1], parts[1]))
    elif parts[0] in ("FSEL", "SEL", "USEL"):
        # FSEL a, b, !P == FSEL b, a, P
        ar = [x.strip() for x in args.split(",")]
        if len(ar) == 4:
            ar[1:3] = sorted(ar[1:3])
            args = ", ".join(ar)
    return join_instr(pred, ".".join(parts), args)


def _imm32(tok):
    tok = tok.strip()
    try:
        if re.match(r"^-?0x[0-9a-f]+$", tok):
            return "0x%x" % (int(tok, 16) & 0xFFFFFFFF)
        if re.match(r"^-?\d+$", tok):
            return "0x%x" % (int(tok) & 0xFFFFFFFF)
    except ValueError:
        pass
    return None


def _half_bits(tok):
    try:
        return struct.unpack("<H", struct.pack("<e", float(tok)))[0]
    except (ValueError, OverflowError, struct.error):
        return None


def equivalent(lf):
    """Canonical form of a loose instruction for instructions that ptxas
    encodes in several equivalent ways (register and immediate moves,
    32-bit adds)."""
    pred, op, args = split_instr(lf)
    ar = [x.strip() for x in args.split(",")] if args else []
    if op in ("IMAD.MOV.U32", "IMAD.MOV", "IMAD.U32") and len(ar) == 4 and ar[1:3] == ["RZ", "RZ"]:
        return join_instr(pred, "MOV", f"{ar[0]}, {_imm32(ar[3]) or ar[3]}")
    if op == "MOV" and len(ar) == 2:
        return join_instr(pred, "MOV", f"{ar[0]}, {_imm32(ar[1]) or ar[1]}")
    if op == "HFMA2.MMA" and len(ar) == 5 and ar[1:3] == ["-RZ", "RZ"]:
        hi, lo = _half_bits(ar[3]), _half_bits(ar[4])
        if hi is not None and lo is not None:
            return join_instr(pred, "MOV", f"{ar[0]}, 0x{(hi << 16) | lo:x}")
    if op == "CS2R" and len(ar) == 2 and ar[1] == "SRZ":
        return join_instr(pred, "MOV", f"{ar[0]}, 0x0")
    if op == "IADD3" and len(ar) == 4 and ar[3] == "RZ" and "RZ" in ar[1:3]:
        x = ar[2] if ar[1] == "RZ" else ar[1]
        return join_instr(pred, "MOV", f"{ar[0]}, {_imm32(x) or x}")
    if op == "IADD3" and len(ar) == 4 and ar[3] == "RZ":
        return _add(pred, ar[0], ar[1], ar[2])
    if op == "VIADD" and len(ar) == 3 and ar[2] in ("RZ", "0x0"):
        return join_instr(pred, "MOV", f"{ar[0]}, {ar[1]}")
    if op == "VIADD" and len(ar) == 3:
        return _add(pred, ar[0], ar[1], ar[2])
    if op in ("IMAD.X", "IADD3.X"):
        # IMAD.X d, RZ, RZ, a, P == IADD3.X d, RZ, a, RZ, P, !PT: a + carry
        regs = [x for x in ar[1:] if x not in ("RZ", "!PT", "PT")]
        if op == "IMAD.X" and len(ar) == 5 and ar[1:3] == ["RZ", "RZ"]:
            return join_instr(pred, "ADDX", f"{ar[0]}, {ar[3]}, {ar[4]}")
        if op == "IADD3.X" and len(ar) == 6 and ar[5] == "!PT" and len(regs) == 2 \
                and "RZ" in ar[1:4]:
            return join_instr(pred, "ADDX", f"{ar[0]}, {regs[0]}, {ar[4]}")
    if op.startswith("ATOMG.") and args.startswith("PT, RZ, "):
        # an atomic whose result is discarded is a reduction
        return join_instr(pred, "REDG." + op[6:], args[len("PT, RZ, "):])
    if op == "IMAD.SHL.U32" and len(ar) == 4 and ar[3] == "RZ" and _imm32(ar[2]):
        v = int(_imm32(ar[2]), 16)
        if v and v & (v - 1) == 0:
            return join_instr(pred, "SHL", f"{ar[0]}, {ar[1]}, 0x{v.bit_length() - 1:x}")
    if op == "SHF.L.U32" and len(ar) == 4 and ar[3] == "RZ" and _imm32(ar[2]):
        return join_instr(pred, "SHL", f"{ar[0]}, {ar[1]}, {_imm32(ar[2])}")
    if op == "IMAD.IADD" and len(ar) == 4 and ar[2] == "0x1":
        return _add(pred, ar[0], ar[1], ar[3])
    if op.split(".")[0] in ("FADD", "FMUL", "DADD", "DMUL") and len(ar) == 3:
        return join_instr(pred, op, ", ".join([ar[0]] + sorted(ar[1:])))
    return lf


def _add(pred, d, x, y):
    x, y = _imm32(x) or x, _imm32(y) or y
    return join_instr(pred, "ADD", ", ".join([d] + sorted([x, y])))


def equivalent_summary(only_a, only_b):
    pairs = collections.Counter()
    for k in only_a:
        for j in only_b:
            if equivalent(k) == equivalent(j):
                pairs[f"{opcode(k)}/{opcode(j)}"] += min(only_a[k], only_b[j])
    return ", ".join(f"{p} x{n}" for p, n in pairs.most_common(4))


def closure(img, root):
    """Unique names of every function reachable from root by direct calls."""
    seen, todo = [], [root]
    while todo:
        n = todo.pop()
        f = img.funcs.get(n)
        if f is None:
            continue
        for c in sorted(f.callees):
            if c != root and c not in seen:
                seen.append(c)
                todo.append(c)
    return seen


def address_taken(img):
    """Unique names of functions whose address is used (function tables in
    data, or an address computed in code)."""
    out = set()
    for sec, rels in img.elf.relocs.items():
        if not img.elf.sections[sec]["name"].startswith((".nv.global", ".nv.constant")):
            continue      # code and .debug_frame name every function
        for sym, _, _ in rels.values():
            if sym is not None and sym["type"] == 2 and sym["name"] in img.funcs:
                out.add(sym["name"])
    bases = set()
    for f in img.funcs.values():
        for t in f.norm:
            if not split_instr(t)[1].startswith("CALL"):
                bases.update(re.findall(r"<F:([^>]*)>", t))
    for f in img.funcs.values():
        if f.base in bases and f.base == f.orig:
            out.add(f.name)
    return out


def referenced_functions(img):
    """Unique names of the live functions: reachable by direct calls from a
    kernel, an exported (.visible/.weak) function or an address-taken one
    (function tables in data, addresses computed in code)."""
    addr = set()
    for f in img.funcs.values():
        for t in f.norm:
            if not split_instr(t)[1].startswith("CALL"):
                addr.update(m.group(1) or m.group(2)
                            for m in re.finditer(r"<F:([^>]*)>|<&([^>]*)>", t))
    copies = collections.Counter(f.base for f in img.funcs.values())
    roots = set(img.addr_taken)
    for f in img.funcs.values():
        # an address names a function by its base name: certain only when
        # there is one function of that name (address-taken functions are
        # defined once, in taskcache's module data)
        if f.is_kernel or f.binding != "LOCAL" or (f.base in addr and copies[f.base] == 1):
            roots.add(f.name)
    live = set(roots)
    for r in roots:
        live.update(closure(img, r))
    return live


def worst(classes):
    return max(classes, key=lambda c: SEVERITY[c]) if classes else "identical"


def compare_kernel(ix, iy, kname):
    fx, fy = ix.funcs[ix.kernel_func[kname]], iy.funcs[iy.kernel_func[kname]]
    body = compare_seq(fx.norm, fy.norm)
    cx = {}
    for n in closure(ix, fx.name):
        cx.setdefault(ix.funcs[n].base, n)
    cy = {}
    for n in closure(iy, fy.name):
        cy.setdefault(iy.funcs[n].base, n)
    callees = {}
    for base in sorted(set(cx) & set(cy)):
        callees[base] = compare_seq(ix.funcs[cx[base]].norm, iy.funcs[cy[base]].norm)
    only_x = sorted(set(cx) - set(cy))
    only_y = sorted(set(cy) - set(cx))
    classes = [body["class"]] + [r["class"] for r in callees.values()]
    if only_x or only_y:
        classes.append("different")
    cls = worst(classes)
    res = {"class": cls, "body": body, "callees": callees}
    if only_x:
        res["callees_only_in_" + ix.label] = only_x
    if only_y:
        res["callees_only_in_" + iy.label] = only_y
    res["indirect_calls"] = [fx.indirect_calls, fy.indirect_calls]
    # callees whose linkage differs: ptxas treats calls to internal and to
    # exported (.weak/.visible) functions differently
    link = {}
    relocatable = "B" not in (ix.label, iy.label)
    for base in sorted(set(cx) & set(cy)) if relocatable else ():
        bx = ix.funcs[cx[base]].binding
        by = iy.funcs[cy[base]].binding
        if bx != by:
            link[base] = [bx, by]
    if link:
        res["callee_linkage"] = link
    if relocatable:
        ext = [b for b in sorted(set(cx) & set(cy)) if (cx[b] in ix.addr_taken) != (cy[b] in iy.addr_taken)
               or (ix.label == "A" and cx[b] in ix.addr_taken) or (iy.label == "A" and cy[b] in iy.addr_taken)]
        if ext:
            res["callees_in_module_data"] = ext
    rx = ix.info.get(fx.orig, {})
    ry = iy.info.get(fy.orig, {})
    res["resources"] = [rx, ry]
    res["explanation"], res["tags"] = explain_kernel(res, ix.label, iy.label)
    return res


def explain_kernel(res, lx, ly):
    """One paragraph of words, and tags for the summary."""
    if res["class"] == "identical":
        return "", []
    parts, tags = [], []
    b = res["body"]
    if b["class"] == "regs":
        parts.append(f"kernel: registers renamed ({b['renamed']})")
        tags.append("kernel: registers renamed")
    elif b["class"] == "different":
        parts.append("kernel: " + b["explanation"])
        tags += ["kernel: " + c for c in (b.get("categories") or ["?"])]
    cal = res["callees"]
    ndiff = [n for n, r in cal.items() if r["class"] == "different"]
    nregs = [n for n, r in cal.items() if r["class"] == "regs"]
    if cal:
        counts = collections.Counter(r["class"] for r in cal.values())
        if ndiff or nregs:
            parts.append("callees: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES if counts[c]))
    if nregs:
        tags.append("callees: registers renamed")
    for n in ndiff[:4]:
        parts.append(f"callee {n}: {cal[n]['explanation']}")
    if len(ndiff) > 4:
        parts.append(f"... and {len(ndiff) - 4} more callees differ")
    if ndiff:
        tags += sorted({"callees: " + c for n in ndiff for c in (cal[n].get("categories") or ["?"])})
    link = res.get("callee_linkage")
    if link and res["body"]["class"] != "identical":
        parts.append("the kernel calls " + ", ".join(
            f"{n} ({v[0]} in {lx}, {v[1]} in {ly})" for n, v in list(link.items())[:3])
            + ": taskcache copies called functions with internal linkage, and ptxas "
            "allocates registers around calls to internal and to exported functions "
            "differently (the likely cause)")
        tags.append("callee linkage differs (internal copy vs exported function)")
    ext = res.get("callees_in_module_data")
    if ext and res["body"]["class"] != "identical":
        parts.append("the kernel calls " + ", ".join(ext[:3]) + ", whose address is taken: "
                     "taskcache defines it once in the module-data object, so the kernel's unit "
                     "was compiled against an .extern declaration, while whole-module ptxas -c "
                     "compiled both together (the likely cause)")
        tags.append("callee is address-taken (in taskcache's module data, .extern in the unit)")
    rx, ry = res.get("resources", [{}, {}])
    for key, word in (("regcount", "registers"), ("frame_size", "stack frame")):
        if key in rx and key in ry and rx[key] != ry[key]:
            parts.append(f"{word} {rx[key]} vs {ry[key]}")
            tags.append(f"{word} differ")
    for key, lab in ((f"callees_only_in_{lx}", lx), (f"callees_only_in_{ly}", ly)):
        if res.get(key):
            parts.append(f"called only in {lab}: " + ", ".join(res[key][:6])
                         + (" ..." if len(res[key]) > 6 else ""))
            tags.append(f"callee set differs (only in {lab})")
    return "; ".join(parts), tags


def attribute(comps, whole=False, how="relocatable compilation (ptxas -c)"):
    """A vs B: when taskcache's code equals whole-module relocatable code
    (A vs C identical or regs), every A vs B difference is what relocatable
    compilation itself does, and C vs B shows it. When taskcache compiled
    the module whole, A vs C is explained by C vs B instead."""
    ab, ac, cb = comps["AvsB"], comps["AvsC"], comps["CvsB"]
    if whole and ac["class"] != "identical" and ab["class"] in ("identical", "regs"):
        ac["attributed_to"] = "taskcache compiled the module whole"
        ac["explanation"] = ("taskcache compiled this module whole (not split), so A is "
                             "whole-program code like B" + (" up to register names" if ab["class"] == "regs" else "")
                             + "; C vs B: " + cb.get("explanation", ""))
        ac["tags"] = ["taskcache compiled the module whole (A = B)"]
    if ab["class"] == "identical":
        return
    short = how.split(" (")[0]
    if ac["class"] in ("identical", "regs"):
        ab["attributed_to"] = short
        pre = ("A = C" + (" up to register names" if ac["class"] == "regs" else "")
               + f", so this is what {how} does to this kernel")
        ab["explanation"] = pre + (": " + cb["explanation"] if cb.get("explanation") else "")
        ab["tags"] = [f"explained by {short} (A = C)"] + cb.get("tags", [])
    else:
        ab["attributed_to"] = f"{short} and taskcache (A differs from C)"
        ab["tags"] = ["A differs from C too"] + ab.get("tags", [])


# --------------------------------------------------------------------------
# images

class Image:
    def __init__(self, label, path, tools):
        self.label = label
        self.path = path
        self.elf = Elf(path)
        funcs, labels, kernels, sec_end, self.disasm = disassemble(path, tools, self.elf)
        self.funcs = funcs
        self.normalizer = Normalizer(label, self.elf, funcs, labels, kernels, sec_end)
        for f in funcs.values():
            self.normalizer.normalize(f)
        elf_kernels = set(self.elf.kernels())
        self.kernel_func = {}
        for f in funcs.values():
            if f.is_kernel or (f.orig in elf_kernels and f.base == f.orig):
                self.kernel_func.setdefault(f.orig, f.name)
        self.missing_kernels = sorted(elf_kernels - set(self.kernel_func))
        self.info = self.elf.function_info()
        self.addr_taken = address_taken(self)


def build_images(args, tools, work):
    ptx = os.path.abspath(args.ptx)
    arch = args.arch
    paths = {x: os.path.join(work, f"{x}.cubin") for x in "ABC"}
    info = {}
    extra_ptxas = shlex.split(args.ptxas_args) if args.ptxas_args else []
    env = dict(os.environ)
    tc_args = [tools["taskcache"], "build", ptx, "-o", paths["A"], "--arch", arch, "--no-cache"]
    tc_args += args.extra_taskcache_args
    if not c_is_ewp(args) and "--relocatable-units" not in args.extra_taskcache_args:
        tc_args.append("--relocatable-units")  # A and C compiled alike
    if tools.get("ptxas") and "--ptxas" not in args.extra_taskcache_args:
        env.setdefault("TASKCACHE_PTXAS", tools["ptxas"])
    p, dt = run_cmd(tc_args, "taskcache build", env=env)
    info["A"] = {"command": tc_args, "seconds": round(dt, 3),
                 "note": (p.stderr.strip().splitlines() or [""])[-1]}
    whole = [ln for ln in p.stderr.splitlines() if "whole" in ln.lower()]
    if whole:
        info["A"]["compiled_whole"] = whole
    b_args = [tools["ptxas"], f"-arch={arch}", *extra_ptxas, ptx, "-o", paths["B"]]
    p, dt = run_cmd(b_args, "ptxas (whole module)")
    info["B"] = {"command": b_args, "seconds": round(dt, 3)}
    if c_is_ewp(args):
        c_args = [tools["taskcache"], "build", ptx, "-o", paths["C"], "--arch", arch,
                  "--no-cache", "--whole-program-units", "--unit-cost", "1000000000"]
        p, dt = run_cmd(c_args, "taskcache build (the module as one -ewp unit)", env=env)
        info["C"] = {"command": c_args, "seconds": round(dt, 3)}
        return paths, info
    obj = os.path.join(work, "C.o")
    c_args = [tools["ptxas"], f"-arch={arch}", "-c", *extra_ptxas, ptx, "-o", obj]
    p, dt = run_cmd(c_args, "ptxas -c (whole module)")
    l_args = [tools["nvlink"], f"-arch={arch}", obj, "-o", paths["C"]]
    p2, dt2 = run_cmd(l_args, "nvlink")
    info["C"] = {"command": c_args + ["&&"] + l_args, "seconds": round(dt + dt2, 3)}
    return paths, info


def c_is_ewp(args):
    """Whether A has whole-program units, and C is made the same way."""
    return "--whole-program-units" in args.extra_taskcache_args


# --------------------------------------------------------------------------
# report

def pct(n, d):
    return f"{100.0 * n / d:.0f}%" if d else "-"


def summarize(kernels, comps):
    summary = {}
    for x, y in comps:
        key = f"{x}vs{y}"
        cnt = collections.Counter(k["comparisons"][key]["class"] for k in kernels)
        body = collections.Counter(k["comparisons"][key]["body"]["class"] for k in kernels)
        callee_cnt = collections.Counter()
        for k in kernels:
            for r in k["comparisons"][key]["callees"].values():
                callee_cnt[r["class"]] += 1
        tags = collections.Counter(t for k in kernels for t in k["comparisons"][key].get("tags", [])
                                   if k["comparisons"][key]["class"] != "identical")
        regs = [(k["comparisons"][key].get("resources") or [{}, {}]) for k in kernels]
        regs = [(a.get("regcount"), b.get("regcount")) for a, b in regs
                if a.get("regcount") is not None and b.get("regcount") is not None]
        more = [a - b for a, b in regs if a > b]
        fewer = [b - a for a, b in regs if a < b]
        summary[key] = {
            "kernels": {c: cnt[c] for c in CLASSES},
            "kernel_bodies": {c: body[c] for c in CLASSES},
            "callee_copies": {c: callee_cnt[c] for c in CLASSES},
            "classified": sum(cnt.values()),
            "tags": tags.most_common(),
            "register_count": {"equal": len(regs) - len(more) - len(fewer),
                               f"more_in_{x}": len(more), f"fewer_in_{x}": len(fewer),
                               "max_more": max(more, default=0), "max_fewer": max(fewer, default=0)},
        }
    return summary


def format_summary(summary, nk, ptx, extra_lines=()):
    lines = [f"sass_compare: {ptx}: {nk} kernels"]
    for l in extra_lines:
        lines.append("  " + l)
    for key, s in summary.items():
        x, y = key.split("vs")
        k = s["kernels"]
        lines.append(f"{x} vs {y}: " + ", ".join(f"{k[c]} {c}" for c in CLASSES)
                     + "  (kernel bodies: " + ", ".join(f"{s['kernel_bodies'][c]} {c}" for c in CLASSES)
                     + "; callee copies: " + ", ".join(f"{s['callee_copies'][c]} {c}" for c in CLASSES)
                     + ")")
        rc = s["register_count"]
        if rc[f"more_in_{x}"] or rc[f"fewer_in_{x}"]:
            lines.append(f"    register count: {rc['equal']} equal"
                         + (f", {rc[f'more_in_{x}']} more in {x} (up to +{rc['max_more']})"
                            if rc[f"more_in_{x}"] else "")
                         + (f", {rc[f'fewer_in_{x}']} fewer in {x} (up to -{rc['max_fewer']})"
                            if rc[f"fewer_in_{x}"] else ""))
        for tag, n in s["tags"][:10]:
            lines.append(f"    {n:5d} kernels: {tag}")
    return "\n".join(lines)


def format_report(result):
    out = []
    out.append("SASS comparison of " + result["ptx"])
    for x in "ABC":
        out.append(f"  {x}: {IMAGE_DESC[x]}: {' '.join(map(str, result['images'][x]['command']))}")
    out.append("")
    out.append("classes: identical (after normalization) / regs (consistent register renaming) / "
               "different (explained)")
    out.append("")
    out.append(result["summary_text"])
    out.append("")
    w = max([len(k["name"]) for k in result["kernels"]] + [6])
    out.append(f"{'kernel':<{w}}  {'A vs B':<10} {'A vs C':<10} {'C vs B':<10}")
    out.append("-" * (w + 34))
    for k in result["kernels"]:
        c = k["comparisons"]
        out.append(f"{k['name']:<{w}}  {c['AvsB']['class']:<10} {c['AvsC']['class']:<10} "
                   f"{c['CvsB']['class']:<10}")
        for key in ("AvsC", "AvsB"):
            e = c[key]["explanation"]
            if e:
                out.append(f"    {key[0]} vs {key[-1]}: {e}")
    if result.get("functions"):
        out.append("")
        out.append("functions that no kernel reaches by direct calls (address-taken, exported, "
                   "or dead copies), compared by name:")
        for f in result["functions"]:
            cmp = ", ".join(f"{k[0]} vs {k[-1]} {v['class']}" for k, v in f["comparisons"].items())
            out.append(f"  {f['name']}: in " + ",".join(f["present_in"]) + (f"; {cmp}" if cmp else ""))
            for x, names in f.get("unreferenced", {}).items():
                out.append(f"    {x}: {len(names)} cop{'y' if len(names) == 1 else 'ies'} that no kernel, "
                           f"exported or address-taken function reaches (dead code): "
                           + ", ".join(names[:4]))
            for k, v in f["comparisons"].items():
                if v.get("explanation"):
                    out.append(f"    {k[0]} vs {k[-1]}: {v['explanation']}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------
# main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx", required=True, help="the PTX module")
    ap.add_argument("--taskcache", default=None, help="taskcache binary (default build/taskcache)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvdisasm", default=None, help="nvdisasm binary ($NVDISASM, CUDA_HOME, PATH)")
    ap.add_argument("--cuobjdump", default=None, help="cuobjdump, used when nvdisasm is missing")
    ap.add_argument("--ptxas", default=None, help="ptxas for the whole-module builds")
    ap.add_argument("--nvlink", default=None)
    ap.add_argument("--json", default=None, help="write everything here")
    ap.add_argument("--report", default=None, help="write the per-kernel table here")
    ap.add_argument("--workdir", default=None, help="keep the images and disassembly here")
    ap.add_argument("--ptxas-args", default="", help="extra ptxas options for B and C (one string)")
    ap.add_argument("--extra-taskcache-args", nargs=argparse.REMAINDER, default=[],
                    help="everything after this goes to `taskcache build`")
    args = ap.parse_args(argv)
    if len(args.extra_taskcache_args) == 1 and " " in args.extra_taskcache_args[0]:
        args.extra_taskcache_args = shlex.split(args.extra_taskcache_args[0])
    if c_is_ewp(args):
        IMAGE_DESC["C"] = "the whole module as one -ewp unit (whole-program-unit code)"
    if not os.path.isfile(args.ptx):
        print(f"sass_compare: {args.ptx}: no such file", file=sys.stderr)
        return 2

    tools = {
        "taskcache": args.taskcache or os.environ.get("TASKCACHE_BIN")
        or os.path.join(ROOT, "build", "taskcache"),
        "ptxas": find_tool("ptxas", args.ptxas),
        "nvlink": find_tool("nvlink", args.nvlink),
        "nvdisasm": find_tool("nvdisasm", args.nvdisasm, "NVDISASM"),
        "cuobjdump": find_tool("cuobjdump", args.cuobjdump),
    }
    if args.nvdisasm and not tools["nvdisasm"]:
        print(f"sass_compare: --nvdisasm {args.nvdisasm}: not an executable", file=sys.stderr)
        return 2
    for need in ("ptxas", "nvlink"):
        if not tools[need]:
            print(f"sass_compare: {need} not found (set CUDA_HOME or PATH)", file=sys.stderr)
            return 1
    if not os.access(tools["taskcache"], os.X_OK):
        print(f"sass_compare: taskcache binary not found at {tools['taskcache']}", file=sys.stderr)
        return 1
    if not tools["nvdisasm"] and not tools["cuobjdump"]:
        print("sass_compare: neither nvdisasm nor cuobjdump found "
              "(use --nvdisasm, $NVDISASM or CUDA_HOME)", file=sys.stderr)
        return 1
    disasm_tool = tools["nvdisasm"] or tools["cuobjdump"]

    tmp = None
    if args.workdir:
        work = os.path.abspath(args.workdir)
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="sass_compare-")
        work = tmp.name
    try:
        t0 = time.monotonic()
        paths, build_info = build_images(args, tools, work)
        images = {}
        for x in "ABC":
            images[x] = Image(x, paths[x], tools)
            if args.workdir:
                with open(os.path.join(work, f"{x}.sass"), "w") as fh:
                    fh.write(images[x].disasm)
    except ToolError as e:
        print(f"sass_compare: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp is not None:
            tmp.cleanup()

    knames = sorted(set(images["A"].kernel_func) | set(images["B"].kernel_func)
                    | set(images["C"].kernel_func))
    kernels = []
    missing = []
    for k in knames:
        rec = {"name": k, "comparisons": {}}
        absent = [x for x in "ABC" if k not in images[x].kernel_func]
        if absent:
            missing.append((k, absent))
            for x, y in COMPARISONS:
                rec["comparisons"][f"{x}vs{y}"] = {
                    "class": "different", "body": {"class": "different"}, "callees": {},
                    "explanation": f"kernel missing from image(s) {', '.join(absent)}",
                    "tags": ["kernel missing"]}
            kernels.append(rec)
            continue
        for x, y in COMPARISONS:
            rec["comparisons"][f"{x}vs{y}"] = compare_kernel(images[x], images[y], k)
        attribute(rec["comparisons"], bool(build_info["A"].get("compiled_whole")),
                  "whole-program-unit compilation (ptxas -ewp)" if c_is_ewp(args)
                  else "relocatable compilation (ptxas -c)")
        kernels.append(rec)

    # functions no kernel calls directly (address-taken, exported, dead
    # copies): compared by base name
    reached = {x: set() for x in "ABC"}
    for x in "ABC":
        img = images[x]
        for k, fn in img.kernel_func.items():
            reached[x].add(fn)
            reached[x].update(closure(img, fn))
    standalone = {}
    for x in "ABC":
        img = images[x]
        used = referenced_functions(img)
        for f in img.funcs.values():
            if f.name not in reached[x] and not f.is_kernel:
                entry = standalone.setdefault(f.base, {})
                entry.setdefault(x, [])
                entry[x].append((f.name, f.name in used))
    functions = []
    for base in sorted(standalone):
        have = standalone[base]
        rec = {"name": base, "present_in": sorted(have), "comparisons": {},
               "copies": {x: len(v) for x, v in have.items()}}
        # whole-program code (B) calls private copies through resolved
        # relative tables, without relocations: only A and C can be checked
        dead = {x: [n for n, u in v if not u] for x, v in have.items() if x != "B"}
        dead = {x: v for x, v in dead.items() if v}
        if dead:
            rec["unreferenced"] = dead
        for x, y in COMPARISONS:
            if x in have and y in have:
                r = compare_seq(images[x].funcs[have[x][0][0]].norm,
                                images[y].funcs[have[y][0][0]].norm)
                if r["class"] == "regs":
                    r["explanation"] = f"registers renamed ({r['renamed']})"
                rec["comparisons"][f"{x}vs{y}"] = r
        functions.append(rec)

    summary = summarize(kernels, COMPARISONS)
    extra = []
    if build_info["A"].get("compiled_whole"):
        extra.append("taskcache compiled the module whole: " + build_info["A"]["compiled_whole"][0])
    if missing:
        extra.append("kernels missing from some image: " + ", ".join(f"{k} ({','.join(a)})"
                                                                     for k, a in missing))
    summary_text = format_summary(summary, len(kernels), args.ptx, extra)
    result = {
        "ptx": os.path.abspath(args.ptx),
        "arch": args.arch,
        "tools": {k: v for k, v in tools.items() if v},
        "disassembler": disasm_tool,
        "images": {x: dict(build_info[x], description=IMAGE_DESC[x],
                           functions=len(images[x].funcs), kernels=len(images[x].kernel_func))
                   for x in "ABC"},
        "summary": summary,
        "summary_text": summary_text,
        "kernels": kernels,
        "functions": functions,
        "seconds": round(time.monotonic() - t0, 3),
    }
    if args.report:
        with open(args.report, "w") as fh:
            fh.write(format_report(result))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, sort_keys=False)
            fh.write("\n")
    try:
        print(summary_text, flush=True)
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
