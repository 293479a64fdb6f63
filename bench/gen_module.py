#!/usr/bin/env python3
"""Generate a large, realistic multi-kernel PTX module for benchmarking taskcache.

The module is shaped like the step function of a GPU physics engine as emitted
by a JIT (Taichi / Warp style): many `.entry` kernels ("offloaded tasks") of
varied size that share `__noinline__` helper device functions (helpers call
helpers), `__device__` global arrays and scalars, and `__constant__`
parameters.  A couple of tasks use atomics, a few use static shared memory.

We generate CUDA C and compile it with `nvcc -ptx`, so the PTX is what NVVM
really emits.  Output: OUT.ptx plus the OUT.cu it was made from.

`--edit K` additionally writes a variant in which exactly one entry (the K-th
`.entry` of the module, 0-based, which is task K) is changed at the PTX text
level (a float immediate in an arithmetic instruction is nudged by one ulp, or
-- if the entry has none -- a `membar.cta;` is inserted before its last
`ret;`).  Nothing outside that entry's body changes; this is verified.

Library use (e.g. from bench/run.py):

    import gen_module
    src = gen_module.generate_cuda(tasks=250, seed=1)
    gen_module.compile_ptx(cu_path, ptx_path, arch="sm_90")
    new_text, info = gen_module.edit_ptx(ptx_text, k)   # verified edit

Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from cuda_tools import find_tool  # noqa: E402  (scripts/cuda_tools.py)

# --------------------------------------------------------------------------
# Size knobs.  Tuned so that --tasks 250 gives a ~1.5 MB PTX module that
# whole-module `ptxas -arch=sm_90` compiles in ~3-5 s on a 2-core Xeon.
# --------------------------------------------------------------------------
CAP = 1 << 16                 # element count of every global array
N_HELPERS = 40                # __noinline__ device helpers (4 levels)
HELPER_LEVELS = (16, 12, 8, 4)
TINY_FRAC = 0.12              # fraction of tiny tasks
LARGE_FRAC = 0.10             # fraction of large tasks (loops, lots of math)
MEDIUM_STMTS = (14, 46)       # statement count range for medium tasks
LARGE_STMTS = (40, 80)        # statements per large task (split over loops)
SIZE_SCALE = 0.75             # global multiplier on the statement counts above
                              # (1.0 -> ~1.5 MB / ~5.5 s; 0.75 -> ~1.2 MB / ~4 s)

FLOAT_FIELDS = [
    "x_x", "x_y", "x_z", "v_x", "v_y", "v_z", "f_x", "f_y", "f_z",
    "mass", "inv_mass", "radius", "C_00", "C_01", "C_10", "C_11",
    "F_00", "F_01", "F_10", "F_11", "Jp", "rho", "pressure", "temp",
    "grid_m", "grid_vx", "grid_vy", "grid_vz", "sdf", "phi",
]
INT_FIELDS = ["material", "cell_id", "flags", "neighbor_count", "grid_count"]
FLOAT_SCALARS = ["g_energy", "g_momentum_x", "g_momentum_y", "g_dt_accum",
                 "g_max_speed", "g_gravity_scale", "g_time"]
INT_SCALARS = ["g_n_particles", "g_n_active", "g_step", "g_max_count"]
N_CPARAMS = 128
N_CIPARAMS = 32


# ==========================================================================
# CUDA source generation
# ==========================================================================

class _Gen:
    def __init__(self, tasks: int, seed: int, scale: float):
        self.rng = random.Random(seed)
        self.tasks = tasks
        self.seed = seed
        self.scale = scale * SIZE_SCALE
        self.helpers: list[dict] = []

    # -- small utilities ---------------------------------------------------
    def const(self) -> str:
        r = self.rng
        v = r.uniform(0.05, 3.0)
        if r.random() < 0.2:
            v = -v
        return f"{v:.6f}f"

    def cparam(self) -> str:
        return f"c_params[{self.rng.randrange(N_CPARAMS)}]"

    def field(self) -> str:
        return "f_" + self.rng.choice(FLOAT_FIELDS)

    def pick_helper(self, max_level: int | None = None, exact_level: int | None = None) -> dict:
        """Zipf-ish popularity: low-numbered helpers are used by many tasks."""
        cands = [h for h in self.helpers
                 if (max_level is None or h["level"] <= max_level)
                 and (exact_level is None or h["level"] == exact_level)]
        weights = [1.0 / (h["idx"] + 1) ** 1.2 for h in cands]
        return self.rng.choices(cands, weights=weights, k=1)[0]

    def float_expr(self, vs: list[str], allow_helpers: bool, heavy: bool,
                   helper_max_level: int | None = None) -> str:
        """One random float expression over variables `vs`.

        Every form contains a float literal (so an edit of a constant always
        has something to hit)."""
        r = self.rng
        a = r.choice(vs)
        others = [v for v in vs if v != a] or [a]
        b = r.choice(others)
        c = r.choice(others)
        k = self.const()
        k2 = self.const()
        forms = [
            (8, lambda: f"{a} * {k} + {b}"),
            (8, lambda: f"fmaf({a}, {b}, {k})"),
            (6, lambda: f"{a} * {b} - {k.lstrip('-')} * {c}"),
            (5, lambda: f"({a} - {b}) * {k}"),
            (3, lambda: f"{a} / (fabsf({b}) + {k2 if k2[0] != '-' else k2[1:]})"),
            (3, lambda: f"sqrtf(fabsf({a}) + {k.lstrip('-')})"),
            (3, lambda: f"rsqrtf({a} * {a} + {k.lstrip('-')})"),
            (3, lambda: f"__expf(-fabsf({a}) * {k.lstrip('-')})"),
            (2, lambda: f"__sinf({a} * {k})"),
            (2, lambda: f"__cosf({a} * {k})"),
            (3, lambda: f"fminf({a}, {b} * {k})"),
            (3, lambda: f"fmaxf({a}, {b} + {k})"),
            (4, lambda: f"({a} > {b} ? {a} * {k} : {b} + {k2})"),
            (5, lambda: f"{self.cparam()} * {a} + {k}"),
            (2, lambda: f"fabsf({a}) * {k} + {self.cparam()}"),
        ]
        if heavy:
            forms += [
                (2, lambda: f"tanhf({a} * {k})"),
                (1, lambda: f"sinf({a}) * {k}"),
                (1, lambda: f"logf(fabsf({a}) + 1.0f) * {k}"),
                (1, lambda: f"atan2f({a}, {b} + {k}) + {k2}"),
            ]
        if allow_helpers and self.helpers:
            h = self.pick_helper(max_level=helper_max_level)
            forms.append((4, lambda: self.helper_call(h, a, b, k)))
        weights = [w for w, _ in forms]
        return r.choices(forms, weights=weights, k=1)[0][1]()

    def helper_call(self, h: dict, a: str, b: str, k: str) -> str:
        if h["sig"] == "ff":
            return f"{h['name']}({a}, {b} * {k})"
        return f"{h['name']}({a} * {k}, (int)i_{h['ifield']}[0] + {self.rng.randrange(64)})"

    def statements(self, vs: list[str], n: int, prefix: str, allow_helpers: bool,
                   heavy: bool, indent: str, helper_max_level: int | None = None,
                   forced_calls: list[dict] | None = None) -> tuple[list[str], list[str]]:
        """n statements `float prefixK = expr;`.  Returns (lines, unused_vars).

        Operands favour recent / not-yet-used variables, so most values are
        live; the caller folds the unused ones into a store."""
        r = self.rng
        lines = []
        pool = list(vs)
        unused = list(vs)
        forced = list(forced_calls or [])
        call_slots = set(r.sample(range(n), min(len(forced), n))) if n else set()
        for s in range(n):
            name = f"{prefix}{s}"
            # operand window: recent values + a few older
            window = pool[-6:] + r.sample(pool, min(3, len(pool)))
            if unused and r.random() < 0.6:
                window = [r.choice(unused)] + window
            if s in call_slots and forced:
                h = forced.pop()
                a, b = window[0], r.choice(window)
                expr = self.helper_call(h, a, b, self.const())
            else:
                expr = self.float_expr(window, allow_helpers, heavy, helper_max_level)
            for v in set(window):
                if v in unused and re.search(rf"\b{re.escape(v)}\b", expr):
                    unused.remove(v)
            lines.append(f"{indent}float {name} = {expr};")
            pool.append(name)
            unused.append(name)
        return lines, unused

    @staticmethod
    def fold(vars_: list[str]) -> str:
        if not vars_:
            return "0.0f"
        return " + ".join(vars_)

    # -- helpers -------------------------------------------------------------
    def gen_helpers(self) -> list[str]:
        r = self.rng
        out = []
        idx = 0
        for level, count in enumerate(HELPER_LEVELS):
            for _ in range(count):
                sig = "ff" if r.random() < 0.75 else "fi"
                h = {"idx": idx, "level": level, "sig": sig,
                     "name": f"helper_{idx:02d}_l{level}",
                     "ifield": r.choice(INT_FIELDS)}
                # callees: at least one from level-1, maybe one more from below
                callees = []
                if level > 0:
                    callees.append(self.pick_helper(exact_level=level - 1))
                    if r.random() < 0.5:
                        callees.append(self.pick_helper(max_level=level - 1))
                if sig == "ff":
                    params = "float a, float b"
                    vs = ["a", "b"]
                    pre = []
                else:
                    params = "float a, int j"
                    fld = self.field()
                    vs = ["a", "g"]
                    pre = [f"    float g = {fld}[j & {CAP - 1}];"]
                if r.random() < 0.4:
                    pre.append(f"    float cp = {self.cparam()};")
                    vs.append("cp")
                n = r.randint(3, 9)
                body, unused = self.statements(vs, n, "t", allow_helpers=False, heavy=r.random() < 0.15,
                                               indent="    ", forced_calls=callees)
                out.append(f"__device__ __noinline__ float {h['name']}({params})\n{{")
                out += pre + body
                out.append(f"    return {self.fold(unused)};\n}}\n")
                self.helpers.append(h)
                idx += 1
        return out

    # -- tasks ---------------------------------------------------------------
    def gen_task(self, t: int) -> tuple[str, list[str]]:
        r = self.rng
        u = r.random()
        if u < TINY_FRAC:
            kind = "tiny"
        elif u < TINY_FRAC + LARGE_FRAC:
            kind = "large"
        else:
            kind = "medium"
        if t in self.atomic_tasks:
            kind = "medium"
        elif t in self.shared_tasks and kind == "tiny":
            kind = "medium"
        offload = "serial" if (kind == "tiny" and r.random() < 0.4) else "range_for"
        name = f"step_c{self.seed}_{t}_kernel_{t}_{offload}"
        ext_ptr = r.random() < 0.3
        params = "int n, float dt" + (", float* __restrict__ ext, int ext_stride" if ext_ptr else "")
        L = [f'extern "C" __global__ void {name}({params})', "{"]
        if kind == "tiny":
            L += self.tiny_body(offload, ext_ptr)
        elif kind == "medium":
            L += self.medium_body(t, ext_ptr)
        else:
            L += self.large_body(t, ext_ptr)
        L.append("}\n")
        return kind, L

    def tiny_body(self, offload: str, ext_ptr: bool) -> list[str]:
        r = self.rng
        if offload == "serial":
            s = r.choice(FLOAT_SCALARS)
            return ["    if (blockIdx.x == 0 && threadIdx.x == 0) {",
                    f"        {s} = {s} * {self.const()} + dt * {self.cparam()};",
                    f"        g_step = g_step + {r.randint(1, 3)};",
                    "    }"]
        f = self.field()
        choice = r.randrange(3)
        L = ["    int i = blockIdx.x * blockDim.x + threadIdx.x;", "    if (i >= n) return;"]
        if choice == 0:
            L.append(f"    {f}[i] = {self.const()};")
        elif choice == 1:
            L.append(f"    {f}[i] = {f}[i] * {self.const()};")
        else:
            g = self.field()
            L.append(f"    {f}[i] = {g}[i] * {self.const()} + dt;")
        if ext_ptr:
            L.append(f"    ext[i * ext_stride] = {f}[i];")
        return L

    def loads(self, n_loads: int, index: str = "i") -> tuple[list[str], list[str]]:
        r = self.rng
        L, vs = [], []
        for j in range(n_loads):
            f = self.field()
            if r.random() < 0.7:
                idx = index
            else:
                idx = f"({index} * {r.choice([3, 5, 7, 9])} + {r.randrange(1, 64)}) & {CAP - 1}"
            L.append(f"    float l{j} = {f}[{idx}];")
            vs.append(f"l{j}")
        if r.random() < 0.5:
            L.append(f"    float cp0 = {self.cparam()};")
            vs.append("cp0")
        vs.append("dt")
        return L, vs

    def stores(self, result: str, ext_ptr: bool, indent: str = "    ") -> list[str]:
        r = self.rng
        L = [f"{indent}float res = {result};"]
        outs = r.sample(FLOAT_FIELDS, r.randint(1, 3))
        for j, f in enumerate(outs):
            if j == 0:
                L.append(f"{indent}f_{f}[i] = res;")
            else:
                L.append(f"{indent}f_{f}[i] = res * {self.const()} + {self.cparam()};")
        if ext_ptr:
            L.append(f"{indent}ext[i * ext_stride] = res;")
        return L

    def medium_body(self, t: int, ext_ptr: bool) -> list[str]:
        r = self.rng
        L = ["    int i = blockIdx.x * blockDim.x + threadIdx.x;", "    if (i >= n) return;"]
        if r.random() < 0.2:
            L.append(f"    if (i_{r.choice(INT_FIELDS)}[i] & {1 << r.randrange(4)}) return;")
        ld, vs = self.loads(r.randint(2, 6))
        L += ld
        n = int(r.randint(*MEDIUM_STMTS) * self.scale)
        ncalls = r.choices([0, 1, 2, 3], weights=[3, 5, 3, 1])[0]
        calls = [self.pick_helper() for _ in range(ncalls)]
        if r.random() < 0.35:
            # a data-dependent branch with work on both sides
            h1 = n // 2
            body, unused = self.statements(vs, h1, "a", False, False, "    ", forced_calls=calls)
            L += body
            cond = f"{unused[-1]} > {self.const()}"
            t_body, t_un = self.statements(unused[-3:], max(2, n // 4), "b", True, False, "        ")
            e_body, e_un = self.statements(unused[-3:], max(2, n // 4), "c", True, False, "        ")
            L.append(f"    float br = {self.const()};")
            L.append(f"    if ({cond}) {{")
            L += t_body + [f"        br = {self.fold(t_un)};", "    } else {"]
            L += e_body + [f"        br = {self.fold(e_un)};", "    }"]
            result = self.fold(unused + ["br"])
        else:
            body, unused = self.statements(vs, n, "a", True, False, "    ", forced_calls=calls)
            L += body
            result = self.fold(unused)
        L += self.stores(result, ext_ptr)
        # a couple of tasks reduce into global scalars with atomics
        if self.atomic_tasks.get(t) == "scalar":
            L.append(f"    atomicAdd(&{r.choice(FLOAT_SCALARS)}, res * {self.const()});")
            L.append("    atomicMax(&g_max_count, (int)(res * 16.0f));")
        elif self.atomic_tasks.get(t) == "scatter":
            L.append(f"    int cell = ((int)(fabsf(res) * {self.const().lstrip('-')})) & {CAP - 1};")
            L.append(f"    atomicAdd(&f_grid_m[cell], {unused[0]} * {self.const()});")
            L.append(f"    atomicAdd(&f_grid_vx[cell], res * {self.const()});")
            L.append("    atomicAdd(&i_grid_count[cell], 1);")
        elif self.shared_tasks.get(t):
            L += self.shared_reduce("res")
        return L

    def shared_reduce(self, val: str) -> list[str]:
        # NB: for brevity the early `return` above means out-of-range threads
        # skip the barrier; launches use n % 256 == 0.  Only the PTX matters.
        s = self.rng.choice(FLOAT_SCALARS)
        return ["    __shared__ float s_red[256];",
                f"    s_red[threadIdx.x] = {val};",
                "    __syncthreads();",
                "    for (int s = 128; s > 0; s >>= 1) {",
                "        if (threadIdx.x < s) s_red[threadIdx.x] += s_red[threadIdx.x + s];",
                "        __syncthreads();",
                "    }",
                f"    if (threadIdx.x == 0) atomicAdd(&{s}, s_red[0] * {self.const()});"]

    def large_body(self, t: int, ext_ptr: bool) -> list[str]:
        r = self.rng
        L = ["    int i = blockIdx.x * blockDim.x + threadIdx.x;", "    if (i >= n) return;"]
        ld, vs = self.loads(r.randint(4, 8))
        L += ld
        total = int(r.randint(*LARGE_STMTS) * self.scale)
        pre_n = total // 4
        body, unused = self.statements(vs, pre_n, "p", True, True, "    ")
        L += body
        accs = []
        nloops = r.randint(1, 3)
        per_loop = max(4, (total - pre_n) // nloops)
        for lp in range(nloops):
            acc = f"acc{lp}"
            accs.append(acc)
            L.append(f"    float {acc} = {unused[-1]};")
            if r.random() < 0.5:
                trip = f"c_iparams[{r.randrange(N_CIPARAMS)}]"
                L.append("    #pragma unroll 1")
            else:
                trip = str(r.choice([8, 27, 64]))
                L.append(f"    #pragma unroll {r.choice([1, 2, 2, 4])}")
            L.append(f"    for (int k{lp} = 0; k{lp} < {trip}; ++k{lp}) {{")
            L.append(f"        int j = (i + k{lp} * {r.choice([17, 97, 131, 257])} + {r.randrange(1, 1000)}) & {CAP - 1};")
            L.append(f"        float q0 = {self.field()}[j];")
            L.append(f"        float q1 = {self.field()}[j];")
            lvs = ["q0", "q1", acc] + r.sample(unused, min(2, len(unused)))
            lb, lun = self.statements(lvs, per_loop, f"s{lp}_", True, lp == 0, "        ")
            L += lb
            L.append(f"        {acc} = {self.fold(lun)};")
            if r.random() < 0.3:
                L.append(f"        if ({acc} > {r.uniform(100.0, 5000.0):.3f}f) break;")
            L.append("    }")
        post, pun = self.statements(accs + unused, max(3, total // 8), "z", True, False, "    ")
        L += post
        L += self.stores(self.fold(pun), ext_ptr)
        if self.shared_tasks.get(t):
            L += self.shared_reduce("res")
        return L

    # -- module --------------------------------------------------------------
    def generate(self) -> tuple[str, dict]:
        r = self.rng
        # choose which tasks get atomics / shared memory (deterministic)
        ids = list(range(self.tasks))
        r.shuffle(ids)
        self.atomic_tasks = {}
        self.shared_tasks = {}
        if self.tasks >= 4:
            self.atomic_tasks[ids[0]] = "scalar"
            self.atomic_tasks[ids[1]] = "scatter"
            self.atomic_tasks[ids[2]] = "scalar"
            for t in ids[3:3 + max(1, min(5, self.tasks // 50))]:
                self.shared_tasks[t] = True
        hdr = [
            "// Generated by bench/gen_module.py -- synthetic physics-engine step function",
            f"// tasks={self.tasks} seed={self.seed} scale={self.scale}",
            "",
        ]
        for f in FLOAT_FIELDS:
            hdr.append(f"__device__ float f_{f}[{CAP}];")
        for f in INT_FIELDS:
            hdr.append(f"__device__ int i_{f}[{CAP}];")
        for s in FLOAT_SCALARS:
            hdr.append(f"__device__ float {s};")
        for s in INT_SCALARS:
            hdr.append(f"__device__ int {s};")
        hdr.append(f"__constant__ float c_params[{N_CPARAMS}];")
        hdr.append(f"__constant__ int c_iparams[{N_CIPARAMS}];")
        hdr.append("")
        helpers = self.gen_helpers()
        kinds = {"tiny": 0, "medium": 0, "large": 0}
        tasks_src = []
        for t in range(self.tasks):
            kind, L = self.gen_task(t)
            # the medium generator handles atomics/shared; make sure tiny tasks
            # chosen for them still get one (rare) by falling through silently
            kinds[kind] += 1
            tasks_src += L
        stats = dict(kinds)
        stats["helpers"] = len(self.helpers)
        stats["atomic_tasks"] = sorted(self.atomic_tasks)
        stats["shared_tasks"] = sorted(self.shared_tasks)
        return "\n".join(hdr + helpers + tasks_src) + "\n", stats


def generate_cuda(tasks: int = 250, seed: int = 1, scale: float = 1.0) -> tuple[str, dict]:
    """Return (cuda_source, stats).  Deterministic for (tasks, seed, scale)."""
    return _Gen(tasks, seed, scale).generate()


# ==========================================================================
# Tools
# ==========================================================================

def find_cuda_tool(name: str) -> str:
    """The CUDA tool `name` (scripts/cuda_tools.py's rule); raises when it is not there."""
    path = find_tool(name)
    if not path:
        raise FileNotFoundError(f"{name} not found in $CUDA_HOME/bin, /usr/local/cuda/bin or PATH")
    return path


def compile_ptx(cu_path: str, ptx_path: str, arch: str = "sm_90", rdc: bool = False) -> float:
    """nvcc -ptx; returns seconds taken.  Raises RuntimeError with stderr on failure."""
    nvcc = find_cuda_tool("nvcc")
    cmd = [nvcc, "-ptx", f"-arch={arch}", cu_path, "-o", ptx_path]
    if rdc:
        cmd.insert(2, "-rdc=true")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        err = p.stderr.splitlines()
        errs = [l for l in err if "error" in l.lower()][:20]
        raise RuntimeError(f"command failed (rc={p.returncode}): {' '.join(cmd)}\n"
                           + "\n".join(errs + ["..."] + err[-20:]))
    if p.stderr.strip():
        print(f"note: nvcc printed {len(p.stderr.splitlines())} lines on stderr", file=sys.stderr)
    return dt


def build_module(out_ptx: str, tasks: int = 250, seed: int = 1, arch: str = "sm_90",
                 scale: float = 1.0, rdc: bool = False) -> dict:
    """Generate OUT.cu and OUT.ptx.  Returns a stats/info dict."""
    t0 = time.perf_counter()
    src, stats = generate_cuda(tasks, seed, scale)
    t_gen = time.perf_counter() - t0
    base = out_ptx[:-4] if out_ptx.endswith(".ptx") else out_ptx
    cu_path = base + ".cu"
    os.makedirs(os.path.dirname(os.path.abspath(out_ptx)), exist_ok=True)
    with open(cu_path, "w") as f:
        f.write(src)
    t_nvcc = compile_ptx(cu_path, out_ptx, arch, rdc)
    with open(out_ptx) as f:
        text = f.read()
    ents = entry_spans(text)
    stats.update(cu_path=cu_path, ptx_path=out_ptx, ptx_bytes=len(text.encode()),
                 cu_bytes=len(src.encode()), entries=len(ents),
                 funcs=len(re.findall(r"^\s*(?:\.\w+\s+)*\.func\b", text, re.M)),
                 t_codegen_s=t_gen, t_nvcc_s=t_nvcc)
    return stats


# ==========================================================================
# PTX parsing and editing
# ==========================================================================

_ENTRY_RE = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.entry[ \t]+([\w$.]+)", re.M)


def _match_brace(text: str, pos: int) -> int:
    """Given text[pos] == '{', return the index just after the matching '}'.
    Skips // and /* */ comments."""
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced braces in PTX")


def _skip_to_body(text: str, pos: int) -> int:
    """From just after `.entry NAME`, find the '{' that opens the body
    (skipping the parameter list and any performance directives)."""
    i = pos
    n = len(text)
    paren = 0
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == "{" and paren == 0:
            return i
        elif c == ";" and paren == 0:
            raise ValueError("entry declaration without body (prototype)")
        i += 1
    raise ValueError("entry without body")


def entry_spans(text: str) -> list[tuple[str, int, int, int]]:
    """List of (name, start, body_open, end) for every `.entry` definition.
    start = beginning of the `.entry` line, body_open = index of '{',
    end = index just after the matching '}'."""
    out = []
    pos = 0
    while True:
        m = _ENTRY_RE.search(text, pos)
        if not m:
            break
        try:
            b = _skip_to_body(text, m.end())
        except ValueError:
            pos = m.end()
            continue
        e = _match_brace(text, b)
        out.append((m.group(1), m.start(), b, e))
        pos = e
    return out


def entry_names(text: str) -> list[str]:
    return [s[0] for s in entry_spans(text)]


_FIMM_RE = re.compile(r"0[fF]([0-9A-Fa-f]{8})\b")
_ARITH_RE = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:fma|mul|add|sub|mad|min|max)\.[\w.]*f32\b")


def _nudge_float(bits: int, variant: int) -> int:
    """Change a float32 bit pattern by `variant` ulps (always a different,
    finite, same-sign value)."""
    mant = bits & 0x7FFFFF
    if mant + variant <= 0x7FFFFF:
        return bits + variant
    return bits - variant


def describe_edit(info: dict) -> str:
    """One-line human description of an edit_ptx() info dict."""
    what = (f"{info['old']} -> {info['new']}" if info["kind"] == "float-immediate"
            else f"+{info.get('count', 1)} membar.cta")
    return f"entry #{info['entry_index']} {info['entry']}: {info['kind']} {what}"


def edit_ptx(text: str, k: int, variant: int = 1, verify: bool = True) -> tuple[str, dict]:
    """Return (new_text, info): a copy of `text` in which only entry number k
    (0-based, in file order; k is taken modulo the entry count) is changed in
    a way that changes its machine code.

    Strategy: nudge the first float immediate (0fXXXXXXXX) used by an f32
    arithmetic instruction of that entry by `variant` ulps; if there is none,
    nudge any float immediate of the entry; if there is none either, insert a
    `membar.cta;` (a side effect ptxas cannot drop) before the entry's last
    `ret;` (or its closing brace)."""
    spans = entry_spans(text)
    if not spans:
        raise ValueError("no .entry in module")
    k %= len(spans)
    name, start, bopen, end = spans[k]
    body = text[bopen:end]
    info = {"entry_index": k, "entry": name}
    new_body = None
    # 1) float immediate in an arithmetic instruction, 2) any float immediate
    for want_arith in (True, False):
        off = 0
        for line in body.splitlines(keepends=True):
            code = line.split("//", 1)[0]
            m = _FIMM_RE.search(code)
            if m and not code.lstrip().startswith(".") and (not want_arith or _ARITH_RE.match(code)):
                old = int(m.group(1), 16)
                new = _nudge_float(old, variant)
                new_line = line[:m.start(1)] + f"{new:08X}" + line[m.end(1):]
                new_body = body[:off] + new_line + body[off + len(line):]
                info.update(kind="float-immediate", line=line.strip(),
                            old=f"0f{old:08X} ({struct.unpack('<f', struct.pack('<I', old))[0]!r})",
                            new=f"0f{new:08X} ({struct.unpack('<f', struct.pack('<I', new))[0]!r})")
                break
            off += len(line)
        if new_body is not None:
            break
    if new_body is None:
        # 3) insert a memory barrier (repeated `variant` times so different
        #    variants of the same entry differ from each other as well)
        ins = "\tmembar.cta;\n" * variant
        idx = body.rfind("\tret;")
        if idx < 0:
            idx = body.rfind("ret;")
        if idx < 0:
            idx = body.rfind("}")
        line_start = body.rfind("\n", 0, idx) + 1
        new_body = body[:line_start] + ins + body[line_start:]
        info.update(kind="inserted-membar", count=variant)
    new_text = text[:bopen] + new_body + text[end:]
    if verify:
        verify_single_entry_edit(text, new_text, k)
    return new_text, info


def verify_single_entry_edit(orig: str, edited: str, k: int) -> None:
    """Raise AssertionError unless `edited` differs from `orig` only inside
    the body of entry k (same entries, same names, same order)."""
    a = entry_spans(orig)
    b = entry_spans(edited)
    if [s[0] for s in a] != [s[0] for s in b]:
        raise AssertionError("edit changed the set/order of entries")
    na, sa, ba, ea = a[k]
    nb, sb, bb, eb = b[k]
    if orig[:ba] != edited[:bb]:
        raise AssertionError("edit changed text before entry body")
    if orig[ea:] != edited[eb:]:
        raise AssertionError("edit changed text after entry body")
    if orig[ba:ea] == edited[bb:eb]:
        raise AssertionError("edit did not change the entry body")


# ==========================================================================
# cubin (ELF) inspection -- enough to compare per-kernel machine code
# ==========================================================================

def cubin_sections(data: bytes) -> dict[str, bytes]:
    """Map section name -> contents for a 64-bit little-endian ELF (cubin).
    Kernel code lives in `.text.<kernel name>`."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("expected 64-bit little-endian ELF")
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        name, typ, _flags, _addr, s_off, s_size = struct.unpack_from("<IIQQQQ", data, off)
        hdrs.append((name, typ, s_off, s_size))
    _, _, str_off, str_size = hdrs[e_shstrndx]
    strtab = data[str_off:str_off + str_size]
    out = {}
    for name, typ, s_off, s_size in hdrs:
        end = strtab.find(b"\0", name)
        nm = strtab[name:end].decode("utf-8", "replace")
        out[nm] = b"" if typ == 8 else data[s_off:s_off + s_size]   # 8 = SHT_NOBITS
    return out


def kernel_code(data: bytes) -> dict[str, bytes]:
    """kernel/function name -> machine code bytes (from `.text.NAME`)."""
    return {k[len(".text."):]: v for k, v in cubin_sections(data).items() if k.startswith(".text.")}


def verify_machine_code_edit(orig_ptx: str, edited_ptx: str, entry: str, arch: str = "sm_90") -> str:
    """Compile both modules with whole-module ptxas and check that exactly the
    edited entry's machine code differs.  Returns a one-line summary."""
    import tempfile
    ptxas = find_cuda_tool("ptxas")
    codes = []
    with tempfile.TemporaryDirectory(prefix="gen_module_verify_") as d:
        for i, p in enumerate((orig_ptx, edited_ptx)):
            out = os.path.join(d, f"{i}.cubin")
            cmd = [ptxas, f"-arch={arch}", p, "-o", out]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"command failed (rc={r.returncode}): {' '.join(cmd)}\n{r.stderr}")
            with open(out, "rb") as f:
                codes.append(kernel_code(f.read()))
    a, b = codes
    if set(a) != set(b):
        raise AssertionError("edited cubin has a different set of functions")
    changed = sorted(n for n in a if a[n] != b[n])
    if changed != [entry]:
        raise AssertionError(f"expected only {entry} to change machine code, changed: {changed}")
    return f"machine code of {entry} changed ({len(a[entry])} -> {len(b[entry])} bytes), " \
           f"{len(a) - 1} other functions identical"


# ==========================================================================
# CLI
# ==========================================================================

def _ptxas_time(ptx: str, arch: str) -> float:
    ptxas = find_cuda_tool("ptxas")
    cmd = [ptxas, f"-arch={arch}", ptx, "-o", os.devnull]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"command failed (rc={p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="output PTX path (OUT.ptx; OUT.cu is written next to it)")
    ap.add_argument("--tasks", type=int, default=250, help="number of .entry kernels (default 250)")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    ap.add_argument("--arch", default="sm_90", help="nvcc -arch (default sm_90)")
    ap.add_argument("--scale", type=float, default=1.0, help="extra multiplier on per-task statement counts (default 1.0 = the tuned size)")
    ap.add_argument("--rdc", action="store_true", help="compile with nvcc -rdc=true (default: whole-program PTX)")
    ap.add_argument("--edit", type=int, metavar="K", action="append",
                    help="also write OUT-editK.ptx with only entry K changed (repeatable)")
    ap.add_argument("--edit-variant", type=int, default=1, metavar="V",
                    help="size of the change (ulps / inserted barriers), default 1")
    ap.add_argument("--input", metavar="IN.ptx",
                    help="do not generate: apply --edit to IN.ptx and write the result to --out")
    ap.add_argument("--verify-machine-code", action="store_true",
                    help="for each edit, compile original and variant with ptxas and check that "
                         "only the edited entry's machine code (.text.NAME) differs")
    ap.add_argument("--time-ptxas", action="store_true",
                    help="also time one whole-module `ptxas -arch=ARCH OUT.ptx -o /dev/null`")
    args = ap.parse_args(argv)

    if args.input:
        if not args.edit or len(args.edit) != 1:
            ap.error("--input needs exactly one --edit K")
        with open(args.input) as f:
            text = f.read()
        new, info = edit_ptx(text, args.edit[0], args.edit_variant)
        with open(args.out, "w") as f:
            f.write(new)
        print(f"edit: {describe_edit(info)}  -> {args.out}  [verified: only that entry's body differs]")
        if args.verify_machine_code:
            print("  " + verify_machine_code_edit(args.input, args.out, info["entry"], args.arch))
        return 0

    st = build_module(args.out, args.tasks, args.seed, args.arch, args.scale, args.rdc)
    print(f"wrote {st['ptx_path']}: {st['ptx_bytes']:,} bytes ({st['ptx_bytes'] / 1e6:.2f} MB), "
          f"{st['entries']} .entry, {st['funcs']} .func  (source {st['cu_path']}: {st['cu_bytes']:,} bytes)")
    print(f"tasks: {st['tiny']} tiny, {st['medium']} medium, {st['large']} large; "
          f"{st['helpers']} helpers generated; atomics in tasks {st['atomic_tasks']}, "
          f"shared memory in tasks {st['shared_tasks']}")
    print(f"timing: codegen {st['t_codegen_s']:.2f} s, nvcc -ptx {st['t_nvcc_s']:.2f} s")
    if st["entries"] != args.tasks:
        print(f"error: expected {args.tasks} entries, found {st['entries']}", file=sys.stderr)
        return 1
    if args.edit:
        with open(args.out) as f:
            text = f.read()
        base = args.out[:-4] if args.out.endswith(".ptx") else args.out
        for k in args.edit:
            new, info = edit_ptx(text, k, args.edit_variant)
            p = f"{base}-edit{k}.ptx"
            with open(p, "w") as f:
                f.write(new)
            print(f"edit: {describe_edit(info)}  -> {p}  [verified: only that entry's body differs]")
            if args.verify_machine_code:
                print("  " + verify_machine_code_edit(args.out, p, info["entry"], args.arch))
    if args.time_ptxas:
        dt = _ptxas_time(args.out, args.arch)
        print(f"ptxas -arch={args.arch} {args.out} -o /dev/null: {dt:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
