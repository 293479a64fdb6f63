#!/usr/bin/env bash
# gpu-check.sh -- proves taskcache on a GPU machine (issue "Prove it on the GPU").
#
#   scripts/gpu-check.sh [--dry-run] [--skip STEP[,STEP...]] [--build-dir DIR] [--jobs N]
#                        [--prebuilt DIR]
#
# Builds taskcache and tests/gpu/gpu_run, runs ctest, then:
#   (a) bitwise identity: every CUDA corpus module (plain and -rdc) runs under
#       five builds -- whole-module ptxas cubin (also with EAGER module
#       loading), taskcache cold, warm, after a one-kernel edit, cold with
#       --compiler ptxas -- with the same random inputs; every buffer and
#       global after every launch and the device printf output must be
#       identical (tests/gpu/specs/*.spec say what runs)
#   (b) SASS comparison (tests/gpu/sass_compare.py) of the 250-kernel
#       benchmark module (the default, whole-program units, and relocatable
#       units) and the corpus modules
#   (c) per-kernel GPU time of the benchmark module: whole-module ptxas image
#       (loaded twice, for the noise band) vs the taskcache images (the default,
#       whole-program units, and relocatable units) and the linkable whole-module builds
#       (ptxas -c + nvlink; the module as one -ewp unit), all timed
#       interleaved in one process
#   (d) time to first launch: taskcache warm, cubin load, driver PTX JIT
#       cold and warm
#   (e) build times: bench/run.py --runs 5 --jobs 16, once per compile backend
#       (default units: whole-program) and once with relocatable units
#   (f) tests/gpu/python_gpu_demo.py, when it exists (informational)
#   (g) the real-world corpus (tests/realworld: nvcc, clang, NVRTC, numba,
#       Triton, Quadrants and XLA PTX) run with generic arguments under the
#       whole-module image and taskcache's images in every build mode:
#       tests/gpu/realworld_identity.py; (g2) every corpus kernel's launch
#       attributes as the driver reports them (threads, shared memory,
#       clusters, registers), whole image against every build mode, and a
#       launch asking for all the dynamic shared memory:
#       tests/gpu/launch_attributes.py
#   (h) Triton compiling through TRITON_PTXAS_PATH=taskcache ptxas:
#       tests/gpu/triton_ptxas_check.py; (h2) CUTLASS's Hopper GEMMs built
#       by nvcc alone and by nvcc through taskcache shims, run: every GEMM
#       matches its reference and both programs give the same bytes
#       (tests/gpu/cutlass_check.py; the programs come built in
#       .gpudeps/cutlass, or are built here from $CUTLASS_DIR)
#   (i) taskcache run with JITs that hand PTX to the driver (Quadrants,
#       CuPy, cuda.core; PyTorch's NVRTC kernels and numba-cuda, which
#       hand it none here, are checked for identical results):
#       tests/gpu/intercept_check.py (Quadrants comes as wheels; a JIT that
#       is not installed is reported, not failed); then modules the compiler
#       fails on, loaded with and without taskcache run: the same outcome
#       (tests/gpu/compiler_failures.py); and a module loaded under each JIT option the
#       interceptor maps (optimization level, maximum registers, line info, cache mode):
#       the same registers, memory and results as the driver's (tests/gpu/jit_options.py)
#   (j) XLA (JAX) compiling through taskcache ptxas: tests/gpu/xla_ptxas_check.py
#   (k) cold builds of every real-world corpus module on all the machine's
#       cores against ptxas -split-compile=0 (bench/unit_cost.py all;
#       informational: issue 11's 16-core targets; GPU_CHECK_CORPUS_RUNS runs
#       each, default 2; GPU_CHECK_CORPUS_ARGS replaces "--costs= all", e.g.
#       "--costs= --variant split500=--unit-cost=500 nvcc-llmc/dev_global_norm")
#   (l) issue 11's 2-core targets on a quiet machine: bench/edit_cost.py (edits
#       and cold builds at several unit sizes, beside the edited kernel alone
#       and -split-compile=0) and bench/run.py, both -j 2 and pinned to two
#       CPUs (taskset); informational. GPU_CHECK_TWO_CORE_ARGS replaces the
#       edit_cost.py arguments ("--costs 250,700,1000 generated": sizes beside
#       the default, 500).
# STEPs for --skip: identity, realworld, attributes, sass, timing, first, python, bench, triton, cutlass,
# intercept, xla, corpus, twocore.
#
# --dry-run: no GPU needed. Builds, generates, runs ptxas, the spec checker,
# the taskcache builds of (a) with their cache expectations (gpu_run
# --build-only), the SASS tool if present, and bench/run.py on a small module;
# skips everything that executes on the GPU.
#
# Output: progress lines with time stamps, then a summary table (LAST on
# stdout). Files in $OUT (default ./gpu-out): gpu-check.log (everything),
# results.json, summary.txt, sass.txt, timing.txt, bench-build.txt, intercept.json,
# compiler_failures.json, jit_options.json, details.tar.gz (every RESULT/stdout/stderr of the GPU runs).
# Exit status: 0 all correctness checks passed; 1 a correctness check failed
# (or the build failed); 2 no GPU / missing tools; 3 nothing failed but some
# correctness check did not complete (time budget).
# --prebuilt DIR: do not configure or build; use DIR/taskcache and
# DIR/tests/gpu/gpu_run as they are (for a machine without cmake or the
# development headers; ctest is skipped).
# GPU_CHECK_REALWORLD_ARGS, GPU_CHECK_ATTRIBUTES_ARGS, GPU_CHECK_INTERCEPT_ARGS: more arguments
# for (g), (g2) and (i),
# e.g. "--only triton/single_* --only numba/*" or "--skip quadrants --reps 1".
# GPU_CHECK_TIMING_EXTRA="LABEL=OPTIONS;...": step (c) also times taskcache images built
# with those build options (experiments), e.g. "pic=-Xptxas --position-independent-code=true".
# Time budget: $GPU_CHECK_BUDGET seconds (default 420) from the start; steps
# stop starting new work when it runs out, and say so.
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s.%N)
BUDGET=${GPU_CHECK_BUDGET:-420}
DEADLINE=$(python3 -c "print($START + $BUDGET)")

DRY=0
SKIP=""
BUILD=""
PREBUILT=""
JOBS=$(nproc)
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --skip) SKIP="${2:-}"; shift ;;
        --skip=*) SKIP="${1#--skip=}" ;;
        --build-dir) BUILD="${2:-}"; shift ;;
        --prebuilt) PREBUILT="${2:-}"; shift ;;
        --jobs) JOBS="${2:-}"; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "gpu-check.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
skipped() { case ",$SKIP," in *",$1,"*) return 0 ;; esac; return 1; }

OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" || { echo "gpu-check.sh: cannot create OUT=$OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/gpu-check.log
: > "$LOG"
rm -f "$OUT"/results.json "$OUT"/summary.txt "$OUT"/sass.txt "$OUT"/timing.txt \
    "$OUT"/bench-build.txt "$OUT"/intercept.json "$OUT"/compiler_failures.json "$OUT"/jit_options.json \
    "$OUT"/details.tar.gz   # this script's files of an earlier run
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
if [ -n "$PREBUILT" ]; then
    BUILD=$(cd "$PREBUILT" 2>/dev/null && pwd) || { echo "gpu-check.sh: --prebuilt $PREBUILT: no such directory" >&2; exit 2; }
elif [ -z "$BUILD" ]; then
    BUILD=$ROOT/build-gpu
    # a build directory configured for another checkout path cannot be reused
    if [ -f "$BUILD/CMakeCache.txt" ] &&
        ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
        rm -rf "$BUILD"
    fi
fi
PRE=$WORK/pre.tsv
: > "$PRE"
NOT_RUN=()   # steps not run for a reason the script reports in a row of its own

elapsed() { python3 -c "import time; print(f'{time.time() - $START:6.1f}')"; }
say() { local m; m="[$(date +%H:%M:%S) +$(elapsed)s] $*"; echo "$m"; echo "$m" >> "$LOG"; }
# row CHECK RESULT FIGURES CORRECTNESS(1/0): a line of the final table
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$PRE"; }
left() { python3 -c "import time; print(int($DEADLINE - time.time()))"; }
# a step's deadline: the global one, or now + $1 seconds if that is earlier
step_deadline() { python3 -c "import time; print(min($DEADLINE, time.time() + $1))"; }
tail_log() { tail -n "${2:-25}" "$1" | sed 's/^/    | /'; }
# timing_row CHECK FILE EXIT FIGURES: an informational timing step's end: its
# output kept (in $OUT and the log, the tail shown) and its row, DONE,
# INCOMPLETE (timed out) or FAIL by the exit status
timing_row() {
    local res
    cp "$2" "$OUT/" 2>/dev/null
    cat "$2" >> "$LOG"
    tail_log "$2" 60
    case $3 in 0) res=DONE ;; 124|137) res=INCOMPLETE ;; *) res=FAIL ;; esac
    row "$1" "$res" "$4" 0
}

PY="python3 $ROOT/tests/gpu/gpu_check.py"
COMMON=(--work "$WORK" --log "$LOG" --start "$START")
[ "$DRY" = 1 ] && COMMON+=(--dry-run)

summary_and_exit() {
    local skipped_steps=()
    for s in identity realworld attributes sass timing first python bench triton cutlass intercept xla corpus; do
        skipped "$s" && skipped_steps+=("$s")
    done
    # the table is printed last; the files in $OUT are collected first
    (cd "$WORK" && find identity timing first sass -maxdepth 2 -type f \
        \( -name '*.result' -o -name '*.stdout' -o -name '*.stderr' -o -name '*.json' \
           -o -name '*.txt' -o -name 'edit.ptx' \) 2>/dev/null |
        tar -czf "$OUT/details.tar.gz" -T - 2>/dev/null) || true
    if [ -f "$OUT/details.tar.gz" ] && [ "$(stat -c %s "$OUT/details.tar.gz")" -gt 15000000 ]; then
        rm -f "$OUT/details.tar.gz"
        echo "details.tar.gz was over 15 MB and was dropped" >> "$LOG"
    fi
    [ -f "$WORK/timing.txt" ] && cp "$WORK/timing.txt" "$OUT/timing.txt"
    [ -f "$WORK/sass.txt" ] && cp "$WORK/sass.txt" "$OUT/sass.txt"
    [ -f "$WORK/bench-build.txt" ] && cp "$WORK/bench-build.txt" "$OUT/bench-build.txt"
    # the tables of (g), (h), (h2), (i) and (j), one file
    for f in realworld.log attributes.log triton.log cutlass.log intercept.log xla.log; do
        [ -f "$WORK/$f" ] && { echo "==== $f"; cat "$WORK/$f"; }
    done > "$OUT/checks.txt"
    [ -s "$OUT/checks.txt" ] || rm -f "$OUT/checks.txt"
    $PY summary "${COMMON[@]}" --out "$OUT" --skipped ${skipped_steps[@]+"${skipped_steps[@]}"} \
        --not-run ${NOT_RUN[@]+"${NOT_RUN[@]}"}
    local rc=$?
    [ "${1:-}" != "" ] && [ "$rc" = 0 ] && rc=$1
    echo "(work directory: $WORK; exit status $rc)" >> "$LOG"
    exit "$rc"
}

say "gpu-check: repository $ROOT, OUT=$OUT, work $WORK, budget ${BUDGET}s$([ "$DRY" = 1 ] && echo ', DRY RUN (no GPU execution)')"

# ---- the GPU first, then the tools ------------------------------------------------------
DEVICE="no GPU (dry run)"
if [ "$DRY" = 0 ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        say "FATAL: nvidia-smi not found: this is not a GPU machine (use --dry-run to test the CPU side)"
        exit 2
    fi
    if ! smi=$(nvidia-smi -L 2>&1) || ! echo "$smi" | grep -q '^GPU '; then
        say "FATAL: no GPU: nvidia-smi -L says: $smi"
        exit 2
    fi
    say "GPU: $(echo "$smi" | head -n 1)"
    DEVICE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
    nvidia-smi >> "$LOG" 2>&1
fi
CUDA=${CUDA_HOME:-/usr/local/cuda}
PTXAS=$CUDA/bin/ptxas
[ -x "$PTXAS" ] || PTXAS=$(command -v ptxas || true)
NEED=(python3 "$PTXAS")
[ -z "$PREBUILT" ] && NEED+=(cmake)
for t in "${NEED[@]}"; do
    if [ -z "$t" ] || ! command -v "$t" >/dev/null 2>&1; then
        say "FATAL: required tool missing: ${t:-ptxas} (set CUDA_HOME$([ -z "$PREBUILT" ] && echo '; without cmake, build elsewhere and use --prebuilt DIR'))"
        exit 2
    fi
done
say "ptxas: $PTXAS ($("$PTXAS" --version | tail -n 1))"
[ "$DRY" = 0 ] && DEVICE="$DEVICE; CUDA toolkit $("$PTXAS" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
echo "$DEVICE" > "$WORK/device.txt"

# ---- background: corpus, benchmark module, whole-module ptxas --------------------------
mkdir -p "$WORK/bench"
( bash tests/corpus/build_corpus.sh "$WORK/corpus" > "$WORK/corpus.log" 2>&1; echo $? > "$WORK/corpus.rc" ) &
CORPUS_PID=$!
(
    python3 bench/gen_module.py -o "$WORK/bench/bench.ptx" --tasks 250 > "$WORK/bench-gen.log" 2>&1 || { echo 1 > "$WORK/bench.rc"; exit; }
    t0=$(date +%s.%N)
    "$PTXAS" -arch=sm_90 "$WORK/bench/bench.ptx" -o "$WORK/bench/whole.cubin" >> "$WORK/bench-gen.log" 2>&1 || { echo 2 > "$WORK/bench.rc"; exit; }
    python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')" > "$WORK/bench/ptxas.seconds"
    echo 0 > "$WORK/bench.rc"
) &
BENCH_PID=$!
# on a small machine, do not build at the same time
[ "$JOBS" -le 2 ] && wait "$CORPUS_PID" "$BENCH_PID"

# ---- build --------------------------------------------------------------------------------
GPU_RUN=$BUILD/tests/gpu/gpu_run
TASKCACHE=$BUILD/taskcache
t0=$(date +%s)
if [ -n "$PREBUILT" ]; then
    say "using the prebuilt binaries in $BUILD (no build)"
    echo "prebuilt: $BUILD" > "$WORK/build.log"
    brc=0
else
    say "configure + build in $BUILD (-j$JOBS)"
    # A machine without the OpenSSL/zstd development headers (and no
    # network) builds against headers carried in .gpudeps/include and the
    # runtime libraries it has (libcrypto.so.3, libzstd.so.1).
    DEPS=()
    if ! printf '#include <zstd.h>\n#include <openssl/evp.h>\n' | cc -E -x c - >/dev/null 2>&1 &&
        [ -d "$ROOT/.gpudeps/include" ]; then
        mkdir -p "$WORK/deplib"
        for l in libcrypto.so.3 libzstd.so.1; do
            f=$(ldconfig -p 2>/dev/null | awk -v l="$l" '$1 == l {print $NF; exit}')
            [ -n "$f" ] && ln -sf "$f" "$WORK/deplib/${l%%.so.*}.so"
        done
        DEPS=(-DOPENSSL_ROOT_DIR="$WORK/deplib" -DOPENSSL_INCLUDE_DIR="$ROOT/.gpudeps/include"
              -DOPENSSL_CRYPTO_LIBRARY="$WORK/deplib/libcrypto.so"
              -DZSTD_INCLUDE_DIR="$ROOT/.gpudeps/include" -DZSTD_LIBRARY="$WORK/deplib/libzstd.so")
        say "no system zstd/OpenSSL headers: using .gpudeps with $(ls "$WORK/deplib" | tr '\n' ' ')"
    fi
    { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${DEPS[@]+"${DEPS[@]}"} &&
      cmake --build "$BUILD" -j"$JOBS"; } > "$WORK/build.log" 2>&1
    brc=$?
fi
cat "$WORK/build.log" >> "$LOG"
inproc="ptxas processes (no libnvptxcompiler_static)"
BACKENDS=(ptxas)
if grep -q "taskcache: in-process compiler" "$WORK/build.log" ||
    { [ -n "$PREBUILT" ] && [ -x "$TASKCACHE" ] && grep -q nvPTXCompilerCompile "$TASKCACHE"; }; then
    inproc="in-process compiler built in"
    BACKENDS=(inprocess ptxas)
fi
if [ "$brc" != 0 ] || [ ! -x "$GPU_RUN" ] || [ ! -x "$TASKCACHE" ]; then
    say "BUILD FAILED (exit $brc; $GPU_RUN and $TASKCACHE must exist); last lines:"
    tail_log "$WORK/build.log" 30
    row "build" "FAIL" "cmake exit $brc; see gpu-check.log" 1
    NOT_RUN=(identity sass timing first bench)
    wait
    summary_and_exit 1
fi
row "build" "PASS" "$(( $(date +%s) - t0 )) s; $inproc$([ -n "$PREBUILT" ] && echo "; prebuilt $BUILD")" 1
say "build done in $(( $(date +%s) - t0 )) s ($inproc)"

if [ -n "$PREBUILT" ]; then
    row "ctest" "SKIPPED" "prebuilt binaries" 0
else
    say "ctest"
    if ctest --test-dir "$BUILD" -j"$JOBS" --output-on-failure --timeout 120 > "$WORK/ctest.log" 2>&1; then
        row "ctest" "PASS" "$(grep -E 'tests passed' "$WORK/ctest.log" | tail -n 1)" 1
    else
        say "ctest FAILED:"
        tail_log "$WORK/ctest.log" 30
        row "ctest" "FAIL" "$(grep -E 'tests passed|tests failed' "$WORK/ctest.log" | tail -n 1)" 1
    fi
    cat "$WORK/ctest.log" >> "$LOG"
fi

say "waiting for the corpus and the benchmark module"
wait "$CORPUS_PID" "$BENCH_PID"
cat "$WORK/corpus.log" "$WORK/bench-gen.log" >> "$LOG"
if [ "$(cat "$WORK/corpus.rc" 2>/dev/null)" = 0 ]; then
    row "corpus build" "PASS" "$(grep -c '\.ptx$' "$WORK/corpus.log") PTX files" 1
else
    say "corpus build FAILED:"; tail_log "$WORK/corpus.log"
    row "corpus build" "FAIL" "see gpu-check.log" 1
fi
BENCH=$WORK/bench/bench.ptx
WHOLE=$WORK/bench/whole.cubin
bench_ok=0
if [ "$(cat "$WORK/bench.rc" 2>/dev/null)" = 0 ]; then
    bench_ok=1
    row "benchmark module" "PASS" "$(grep -m1 '^wrote' "$WORK/bench-gen.log" | sed 's/^wrote //'); whole-module ptxas $(cat "$WORK/bench/ptxas.seconds") s (measured during setup, not alone)" 0
    say "benchmark module: $(grep -m1 '^wrote' "$WORK/bench-gen.log")"
else
    say "benchmark module FAILED:"; tail_log "$WORK/bench-gen.log"
    row "benchmark module" "FAIL" "see gpu-check.log" 1
fi

say "spec checker (tests/gpu/check_specs.py)"
if python3 tests/gpu/check_specs.py --ptx-dir "$WORK/corpus" --gpu-run "$GPU_RUN" > "$WORK/specs.log" 2>&1; then
    row "spec coverage" "PASS" "$(tail -n 1 "$WORK/specs.log" | sed 's/^check_specs: //')" 1
else
    tail_log "$WORK/specs.log"
    row "spec coverage" "FAIL" "$(grep -c ERROR "$WORK/specs.log") problem(s); see gpu-check.log" 1
fi
cat "$WORK/specs.log" >> "$LOG"

# ---- (a) bitwise identity ----------------------------------------------------------------
if skipped identity; then say "(a) SKIPPED on request"; else
    timeout -k 10 220 $PY identity "${COMMON[@]}" --json "$WORK/identity.json" \
        --deadline "$(step_deadline 200)" --corpus "$WORK/corpus" --ptxas "$PTXAS" \
        --gpu-run "$GPU_RUN" --jobs "$([ "$JOBS" -gt 8 ] && echo 8 || echo "$JOBS")" ||
        say "(a) the identity step exited with status $? (see the log)"
fi

# ---- (g) the real-world corpus ---------------------------------------------------------------
if skipped realworld; then say "(g) SKIPPED on request"
else
    say "(g) real-world corpus: generic launches, whole image against every build mode"
    timeout -k 10 "$(( $(left) > 90 ? $(left) - 30 : 60 ))" python3 tests/gpu/realworld_identity.py \
        --taskcache "$TASKCACHE" --gpu-run "$GPU_RUN" --out "$WORK" --work "$WORK/realworld" \
        --jobs "$([ "$JOBS" -gt 8 ] && echo 12 || echo 2)" --build-jobs "$([ "$JOBS" -gt 8 ] && echo 4 || echo 1)" \
        --deadline "$(step_deadline "${GPU_CHECK_REALWORLD_S:-300}")" \
        $([ "$DRY" = 1 ] && echo --dry-run) ${GPU_CHECK_REALWORLD_ARGS:-} > "$WORK/realworld.log" 2>&1
    rwrc=$?
    cat "$WORK/realworld.log" >> "$LOG"
    tail_log "$WORK/realworld.log" 8
    rwline=$(grep '^realworld_identity:' "$WORK/realworld.log" | tail -n 1)
    rwtotal=$(grep '^total ' "$WORK/realworld.log" | tail -n 1 | awk '{print $3 " of " $2 " kernels compared (" $4 " fault or hang under the whole image, " $5 "+" $6 "+" $7 " nondeterministic, outside their buffers, codegen-dependent); identical: default " $8 ", reloc " $9 ", unit1 " $10}')
    notrun=$(grep '^not started' "$WORK/realworld.log" | head -n 1)
    if [ "$rwrc" = 0 ] && [ -z "$notrun" ]; then res=PASS
    elif [ "$rwrc" = 0 ]; then res=INCOMPLETE
    elif [ "$rwrc" = 124 ] || [ "$rwrc" = 137 ]; then
        # Killed by the time budget before its summary: say how far it got
        # (a module with a failure still fails the step).
        rwline=$(awk '/^\[ *[0-9.]+s\] [^ ]+: [0-9]+ of [0-9]+ kernels ran, [0-9]+ failure/ { sub(/^\[[^]]*\] /, ""); m++; k += $2; f += $7 }
                     END { printf "stopped by the time budget after %d module(s), %d kernel(s) run, %d failure(s) so far", m, k, f }' \
                 "$WORK/realworld.log")
        case $rwline in *", 0 failure(s) so far") res=INCOMPLETE ;; *) res=FAIL ;; esac
    else res=FAIL; fi
    row "(g) real-world identity" "$res" "${rwline#realworld_identity: }; ${rwtotal}${notrun:+; $notrun}" 1
fi

# ---- (g2) what the driver reads about each kernel -------------------------------------------
if skipped attributes; then say "(g2) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(g2) launch attributes" "DRY" "needs a GPU" 0
else
    say "(g2) launch attributes: every corpus kernel's driver attributes, whole image against every build mode"
    timeout -k 10 "$(( $(left) > 90 ? $(left) - 30 : 60 ))" python3 tests/gpu/launch_attributes.py \
        --taskcache "$TASKCACHE" --out "$OUT" --jobs "$([ "$JOBS" -gt 8 ] && echo 8 || echo 1)" \
        ${GPU_CHECK_ATTRIBUTES_ARGS:-} > "$WORK/attributes.log" 2>&1
    arc=$?
    cat "$WORK/attributes.log" >> "$LOG"
    tail_log "$WORK/attributes.log" 20
    case $arc in 0) res=PASS ;; 2) res=SKIPPED ;; 124|137) res=INCOMPLETE ;; *) res=FAIL ;; esac
    aline=$(grep '^launch_attributes:' "$WORK/attributes.log" | tail -n 1)
    if [ -z "$aline" ]; then
        # Stopped before its summary (the time budget): say how far it got.
        aline=$(awk '/^[^ ]+: [0-9]+ kernels, [0-9]+ difference/ { m++; k += $2; d += $4 }
                     END { printf "stopped by the time budget after %d module(s), %d kernel(s), %d difference(s) so far", m, k, d }' \
                "$WORK/attributes.log")
    fi
    row "(g2) launch attributes" "$res" "$aline" 1
fi

# ---- (b) SASS comparison ------------------------------------------------------------------
CORPUS_PTX=()
for f in tests/corpus/cuda/*.cu; do
    n=$(basename "$f" .cu)
    for v in "$n" "$n.rdc"; do [ -f "$WORK/corpus/$v.ptx" ] && CORPUS_PTX+=("$WORK/corpus/$v.ptx"); done
done
if skipped sass; then say "(b) SKIPPED on request"
elif [ "$bench_ok" = 0 ]; then row "(b) SASS" "SKIPPED" "no benchmark module" 0; NOT_RUN+=(sass)
else
    timeout -k 10 200 $PY sass "${COMMON[@]}" --json "$WORK/sass.json" --deadline "$(step_deadline 180)" \
        --bench "$BENCH" --ptx ${CORPUS_PTX[@]+"${CORPUS_PTX[@]}"} --taskcache "$TASKCACHE" \
        --report "$WORK/sass.txt" --jobs "$([ "$JOBS" -gt 8 ] && echo 8 || echo "$JOBS")" ||
        say "(b) the SASS step exited with status $?"
fi

# ---- (c) per-kernel time --------------------------------------------------------------------
# GPU_CHECK_TIMING_EXTRA="LABEL=OPTIONS;..." also times taskcache images
# built with other build options (experiments), e.g. "pic=-Xptxas -pic=true"
TIMING_EXTRA=()
IFS=';' read -r -a _extra <<< "${GPU_CHECK_TIMING_EXTRA:-}"
for e in ${_extra[@]+"${_extra[@]}"}; do [ -n "$e" ] && TIMING_EXTRA+=(--extra "$e"); done
if skipped timing; then say "(c) SKIPPED on request"
elif [ "$bench_ok" = 0 ]; then row "(c) kernel time" "SKIPPED" "no benchmark module" 1; NOT_RUN+=(timing)
else
    timeout -k 10 200 $PY timing "${COMMON[@]}" --json "$WORK/timing.json" --deadline "$(step_deadline 180)" \
        --ptx "$BENCH" --whole "$WHOLE" --cache "$WORK/bench/cache" --gpu-run "$GPU_RUN" --reps 50 \
        --report "$WORK/timing.txt" --sass-json "$WORK/sass.json" --taskcache "$TASKCACHE" --ptxas "$PTXAS" \
        ${TIMING_EXTRA[@]+"${TIMING_EXTRA[@]}"} ||
        say "(c) the timing step exited with status $?"
fi

# ---- (d) first launch -------------------------------------------------------------------------
if skipped first; then say "(d) SKIPPED on request"
elif [ "$bench_ok" = 0 ]; then row "(d) first launch" "SKIPPED" "no benchmark module" 1; NOT_RUN+=(first)
else
    # the taskcache cache is warm from (c); if (c) was skipped, gpu_run builds it on the
    # untimed priming run
    timeout -k 10 200 $PY first-launch "${COMMON[@]}" --json "$WORK/first.json" \
        --deadline "$(step_deadline 180)" --ptx "$BENCH" --whole "$WHOLE" --cache "$WORK/bench/cache" \
        --gpu-run "$GPU_RUN" --runs 5 || say "(d) the first-launch step exited with status $?"
fi

# ---- (f) the Python demo (numba-cuda + CuPy through taskcache), when it exists ------------
# informational: run twice with one cache; the second process should run Numba's codegen 0 times
DEMO=tests/gpu/python_gpu_demo.py
if skipped python; then say "(f) SKIPPED on request"
elif [ ! -f "$DEMO" ]; then row "(f) Python demo" "SKIPPED" "$DEMO does not exist" 0
elif [ "$DRY" = 1 ]; then row "(f) Python demo" "DRY" "needs a GPU" 0
elif [ "$(left)" -lt 120 ]; then row "(f) Python demo" "SKIPPED" "time budget" 0
else
    say "(f) $DEMO, twice with one cache"
    demo_res="PASS"; demo_fig=""
    for i in 1 2; do
        TASKCACHE_LIB="$BUILD/libtaskcache.so" timeout -k 5 150 python3 "$DEMO" --cache "$WORK/demo-cache" \
            > "$WORK/demo$i.out" 2> "$WORK/demo$i.err"
        drc=$?
        cat "$WORK/demo$i.out" "$WORK/demo$i.err" >> "$LOG"
        line=$(grep '^{' "$WORK/demo$i.out" | tail -n 1)
        say "(f) run $i: exit $drc: ${line:-$(tail -n 2 "$WORK/demo$i.err" | tr '\n' ' ')}"
        [ "$drc" = 0 ] || demo_res="FAIL"
        demo_fig="$demo_fig run $i (exit $drc): ${line:-see log};"
    done
    # every front end that worked: correct results both times, and no
    # compiler call at all in the second process
    if [ "$demo_res" = PASS ]; then
        verdict=$(python3 - "$WORK/demo1.out" "$WORK/demo2.out" <<'PYEOF'
import json, sys
runs = [json.loads([l for l in open(f) if l.startswith("{")][-1]) for f in sys.argv[1:]]
notes, ok = [], True
for fe in runs[0]:
    a, b = runs[0][fe], runs[1].get(fe, {})
    if "error" in a:
        notes.append(f"{fe}: not usable here ({a['error'][:80]})")
        continue
    good = all(a["results_ok"].values()) and all(b.get("results_ok", {0: 0}).values()) \
        and b.get("compiler_calls") == [] and a["image"] == b.get("image")
    ok &= good
    notes.append(f"{fe}: {len(a['compiler_calls'])} compiler calls then "
                 f"{len(b.get('compiler_calls', []))}, results {'ok' if good else 'WRONG'}")
print(("PASS" if ok else "FAIL") + "|" + "; ".join(notes))
PYEOF
)
        demo_res=${verdict%%|*}; demo_fig=${verdict#*|}
    fi
    row "(f) Python demo" "$demo_res" "${demo_fig:0:400}" 0
fi

# ---- (e) build times ------------------------------------------------------------------------
if skipped bench; then say "(e) SKIPPED on request"
else
    if [ "$DRY" = 1 ]; then
        # the plumbing only: a small module, one run (the real thing takes minutes on 2 cores)
        timeout -k 10 300 $PY bench-build "${COMMON[@]}" --json "$WORK/bench-build.json" \
            --deadline "$(step_deadline 280)" --taskcache "$TASKCACHE" --runs 1 --jobs "$JOBS" \
            --backends "${BACKENDS[@]}" \
            --report "$WORK/bench-build.txt" --bench-args --tasks 30 ||
            say "(e) the build-time step exited with status $?"
    else
        timeout -k 10 400 $PY bench-build "${COMMON[@]}" --json "$WORK/bench-build.json" \
            --deadline "$(step_deadline 380)" --taskcache "$TASKCACHE" --runs 5 --jobs 16 \
            --backends "${BACKENDS[@]}" "${BACKENDS[0]}-reloc" \
            --report "$WORK/bench-build.txt" || say "(e) the build-time step exited with status $?"
    fi
fi


# ---- (h) Triton through taskcache ptxas --------------------------------------------------------
if skipped triton; then say "(h) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(h) Triton via taskcache ptxas" "DRY" "needs a GPU" 0
else
    say "(h) Triton through TRITON_PTXAS_PATH=taskcache ptxas"
    timeout -k 10 240 python3 tests/gpu/triton_ptxas_check.py --taskcache "$TASKCACHE" --out "$WORK" \
        > "$WORK/triton.log" 2>&1
    trc=$?
    cat "$WORK/triton.log" >> "$LOG"
    tail_log "$WORK/triton.log" 10
    case $trc in 0) res=PASS ;; 2) res=SKIPPED ;; *) res=FAIL ;; esac
    row "(h) Triton via taskcache ptxas" "$res" "$(grep -E '^(first|second|bundled) ' "$WORK/triton.log" | awk '{print $1 ": " $4 " built, " $5 " hits, " $6 " compiled"}' | tr '\n' ';')" 1
fi

# ---- (h2) CUTLASS through nvcc and taskcache shims ----------------------------------------------
if skipped cutlass; then say "(h2) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(h2) CUTLASS via nvcc + taskcache" "DRY" "needs a GPU" 0
else
    say "(h2) CUTLASS's Hopper GEMMs, nvcc alone and through taskcache shims (tests/gpu/cutlass_check.py)"
    CUTLASS_BINS=$ROOT/.gpudeps/cutlass
    crc=0
    if [ ! -f "$CUTLASS_BINS/build.json" ] && [ -n "${CUTLASS_DIR:-}" ]; then
        CUTLASS_BINS=$WORK/cutlass
        timeout -k 10 400 python3 tests/gpu/cutlass_check.py build --cutlass "$CUTLASS_DIR" \
            --taskcache "$TASKCACHE" --out "$CUTLASS_BINS" > "$WORK/cutlass.log" 2>&1
        crc=$?
    fi
    if [ "$crc" = 0 ]; then
        timeout -k 10 300 python3 tests/gpu/cutlass_check.py run --bins "$CUTLASS_BINS" --out "$OUT" \
            >> "$WORK/cutlass.log" 2>&1
        crc=$?
    fi
    cat "$WORK/cutlass.log" >> "$LOG"
    tail_log "$WORK/cutlass.log" 16
    case $crc in 0) res=PASS ;; 2) res=SKIPPED ;; 124|137) res=INCOMPLETE ;; *) res=FAIL ;; esac
    row "(h2) CUTLASS via nvcc + taskcache" "$res" "$(grep -E '^cutlass:|^cutlass_check:' "$WORK/cutlass.log" | tail -n 1)" 1
fi

# ---- (i) taskcache run: JITs that hand PTX to the driver ----------------------------------------
if skipped intercept; then say "(i) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(i) taskcache run" "DRY" "needs a GPU" 0
else
    say "(i) taskcache run with Quadrants, CuPy, cuda.core, PyTorch, numba-cuda (tests/gpu/intercept_check.py)"
    timeout -k 10 "$(( $(left) > 90 ? $(left) - 20 : 70 ))" python3 tests/gpu/intercept_check.py \
        --taskcache "$TASKCACHE" --out "$WORK" ${GPU_CHECK_INTERCEPT_ARGS:-} > "$WORK/intercept.log" 2>&1
    irc=$?
    cp "$WORK/intercept.json" "$OUT/" 2>/dev/null # every process's figures
    cat "$WORK/intercept.log" >> "$LOG"
    tail_log "$WORK/intercept.log" 30
    case $irc in 0) res=PASS ;; 2) res=INCOMPLETE ;; 124|137) res=INCOMPLETE ;; *) res=FAIL ;; esac
    row "(i) taskcache run" "$res" "exit $irc; $(grep -c PROBLEM "$WORK/intercept.log") problem(s), $(grep -c 'not installed' "$WORK/intercept.log") JIT(s) missing; table in checks.txt" 1
    # driver_check NAME SECONDS TAIL ROW WHAT: tests/gpu/NAME.py, the driver against
    # taskcache run; its table in the log, NAME.json in $OUT (exit 2: a tool is missing)
    driver_check() {
        say "(i) $5 (tests/gpu/$1.py)"
        timeout -k 10 "$2" python3 "tests/gpu/$1.py" --taskcache "$TASKCACHE" --out "$OUT" \
            > "$WORK/$1.log" 2>&1
        local rc=$? res
        cat "$WORK/$1.log" >> "$LOG"
        tail_log "$WORK/$1.log" "$3"
        case $rc in 0) res=PASS ;; 2) res=SKIPPED ;; 124|137) res=INCOMPLETE ;; *) res=FAIL ;; esac
        row "(i) $4" "$res" "exit $rc; the driver against taskcache run in $1.json" 1
    }
    driver_check compiler_failures 120 12 "compiler failures" "what a program sees when the compiler fails"
    driver_check jit_options 180 40 "JIT options" "JIT options: the same code as the driver's"
fi

# ---- (j) XLA through taskcache ptxas ------------------------------------------------------------
if skipped xla; then say "(j) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(j) XLA via taskcache ptxas" "DRY" "needs a GPU" 0
else
    say "(j) XLA (JAX) through taskcache ptxas"
    timeout -k 10 "$(( $(left) > 200 ? 180 : $(left) > 40 ? $(left) - 20 : 20 ))" \
        python3 tests/gpu/xla_ptxas_check.py --taskcache "$TASKCACHE" --out "$WORK" \
        > "$WORK/xla.log" 2>&1
    xrc=$?
    cat "$WORK/xla.log" >> "$LOG"
    tail_log "$WORK/xla.log" 12
    case $xrc in 0) res=PASS ;; 2) res=SKIPPED ;; 124|137) res=INCOMPLETE ;; *) res=FAIL ;; esac
    row "(j) XLA via taskcache ptxas" "$res" "$(grep -E '^(ptxas|first|second) ' "$WORK/xla.log" | awk '{print $1 ": " $4 " built, " $5 " hits, " $6 " compiled"}' | tr '\n' ';')" 1
fi

# ---- (k) cold builds of the corpus on all cores ----------------------------------------------------
if skipped corpus; then say "(k) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(k) corpus cold builds" "DRY" "timings belong to the GPU machine" 0
else
    say "(k) cold builds of every corpus module, -j $JOBS (bench/unit_cost.py all)"
    timeout -k 10 "$(( $(left) > 60 ? $(left) - 20 : 40 ))" python3 bench/unit_cost.py \
        --taskcache "$TASKCACHE" --jobs "$JOBS" --runs "${GPU_CHECK_CORPUS_RUNS:-2}" \
        ${GPU_CHECK_CORPUS_ARGS:---costs= all} \
        > "$WORK/corpus-build.txt" 2>&1
    rc=$?
    timing_row "(k) corpus cold builds" "$WORK/corpus-build.txt" "$rc" \
        "$(grep -E '^(default slower|slower by more|split0 / default|modules whose)' "$WORK/corpus-build.txt" | tr '\n' ';')"
fi

# ---- (l) the 2-core targets, pinned to two CPUs ---------------------------------------------
if skipped twocore; then say "(l) SKIPPED on request"
elif [ "$DRY" = 1 ]; then row "(l) 2-core edits" "DRY" "timings belong to the GPU machine" 0
else
    cpus=$(taskset -pc $$ 2>/dev/null | awk -F': ' '{print $2}' | tr ',' '\n' | head -n 1)
    pin="taskset -c ${cpus%%-*},$(( ${cpus%%-*} + 1 ))"
    say "(l) the 2-core targets: $pin, bench/edit_cost.py and bench/run.py -j 2"
    { timeout -k 10 "$(( $(left) > 60 ? ($(left) - 20) * 2 / 3 : 30 ))" $pin python3 bench/edit_cost.py \
          --taskcache "$TASKCACHE" --jobs 2 ${GPU_CHECK_TWO_CORE_ARGS:---costs 250,700,1000 generated}
      timeout -k 10 "$(( $(left) > 40 ? $(left) - 20 : 20 ))" $pin python3 bench/run.py \
          --taskcache "$TASKCACHE" --jobs 2 --runs 7; } > "$WORK/two-core.txt" 2>&1
    rc=$?
    timing_row "(l) 2-core edits" "$WORK/two-core.txt" "$rc" \
        "$(grep -E '^   (cold|edit) ' "$WORK/two-core.txt" | tr -s ' ' | tr '\n' ';')"
fi

summary_and_exit
