#!/usr/bin/env bash
# build_corpus.sh -- build the taskcache PTX test corpus.
#
# Usage: tests/corpus/build_corpus.sh [--verify] OUTDIR
#
# Produces in OUTDIR (one line is printed per produced file):
#   <name>.ptx            nvcc -ptx -arch=sm_90             for every cuda/<name>.cu
#   <name>.rdc.ptx        nvcc -ptx -arch=sm_90 -rdc=true   for every cuda/<name>.cu
#   <name>.lineinfo.ptx   nvcc -ptx -arch=sm_90 -lineinfo   for the files in LINEINFO_FILES
#   <name>.G.ptx          nvcc -ptx -arch=sm_90 -G          for the files in DEBUG_FILES
#   <name>.ptx            copy of every handwritten ptx/<name>.ptx
#   <name>.llc.ptx        llc -march=nvptx64 -mcpu=sm_80 -mattr=+ptx70 for every llvm/<name>.ll
#                         (skipped, with a message, only when llc has no nvptx64 target)
#
# --verify additionally runs `ptxas -arch=sm_90 FILE -o /dev/null` and
# `ptxas -c -arch=sm_90 FILE -o /dev/null` on every produced file.
#
# Tools: nvcc is looked up as $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc,
# then PATH; ptxas next to nvcc, then PATH; llc as $LLC, llc, llc-14..llc-20.
# Everything is compiled sequentially. Exits non-zero if anything fails.

set -u
set -o pipefail

LINEINFO_FILES="helpers shared_mem"
DEBUG_FILES="globals_atomics"
NVCC_ARCH="-arch=sm_90"
LLC_FLAGS="-march=nvptx64 -mcpu=sm_80 -mattr=+ptx70"

verify=0
outdir=""
for arg in "$@"; do
    case "$arg" in
        --verify) verify=1 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) echo "build_corpus.sh: unknown option: $arg" >&2; exit 2 ;;
        *)
            if [ -n "$outdir" ]; then
                echo "build_corpus.sh: only one OUTDIR may be given" >&2; exit 2
            fi
            outdir="$arg" ;;
    esac
done
if [ -z "$outdir" ]; then
    echo "usage: $0 [--verify] OUTDIR" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# ---- locate tools ---------------------------------------------------------
nvcc=""
if [ -n "${CUDA_HOME:-}" ] && [ -x "${CUDA_HOME}/bin/nvcc" ]; then
    nvcc="${CUDA_HOME}/bin/nvcc"
elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
elif command -v nvcc >/dev/null 2>&1; then
    nvcc="$(command -v nvcc)"
fi
if [ -z "$nvcc" ]; then
    echo "build_corpus.sh: nvcc not found (set CUDA_HOME or add nvcc to PATH)" >&2
    exit 1
fi
ptxas=""
if [ -x "$(dirname "$nvcc")/ptxas" ]; then
    ptxas="$(dirname "$nvcc")/ptxas"
elif command -v ptxas >/dev/null 2>&1; then
    ptxas="$(command -v ptxas)"
fi
if [ "$verify" = 1 ] && [ -z "$ptxas" ]; then
    echo "build_corpus.sh: --verify needs ptxas, which was not found" >&2
    exit 1
fi

mkdir -p "$outdir" || { echo "build_corpus.sh: cannot create $outdir" >&2; exit 1; }
outdir="$(cd "$outdir" && pwd)"

failures=0
produced=()
declare -A seen=()

fail() {
    echo "FAILED: $*" >&2
    failures=$((failures + 1))
}

# record a produced file; refuse two inputs that map to the same output
claim() {
    local name="$1"
    if [ -n "${seen[$name]:-}" ]; then
        fail "$name would be produced twice (${seen[$name]} and $2)"
        return 1
    fi
    seen[$name]="$2"
    return 0
}

produced_ok() {
    produced+=("$1")
    echo "$1"
}

# nvcc_ptx SRC OUT [extra flags...]
nvcc_ptx() {
    local src="$1" out="$2"
    shift 2
    local log
    claim "$(basename "$out")" "$src" || return
    if log="$("$nvcc" -ptx $NVCC_ARCH "$@" "$src" -o "$out" 2>&1)"; then
        [ -n "$log" ] && printf '%s\n' "$log" >&2
        produced_ok "$out"
    else
        printf '%s\n' "$log" >&2
        rm -f "$out"
        fail "nvcc $* $src"
    fi
}

# ---- CUDA sources -----------------------------------------------------------
shopt -s nullglob
cu_files=("$here"/cuda/*.cu)
if [ ${#cu_files[@]} -eq 0 ]; then
    fail "no CUDA sources in $here/cuda"
fi
for src in "${cu_files[@]}"; do
    name="$(basename "$src" .cu)"
    nvcc_ptx "$src" "$outdir/$name.ptx"
    nvcc_ptx "$src" "$outdir/$name.rdc.ptx" -rdc=true
done
for name in $LINEINFO_FILES; do
    if [ -f "$here/cuda/$name.cu" ]; then
        nvcc_ptx "$here/cuda/$name.cu" "$outdir/$name.lineinfo.ptx" -lineinfo
    else
        fail "lineinfo source cuda/$name.cu is missing"
    fi
done
for name in $DEBUG_FILES; do
    if [ -f "$here/cuda/$name.cu" ]; then
        nvcc_ptx "$here/cuda/$name.cu" "$outdir/$name.G.ptx" -G
    else
        fail "debug source cuda/$name.cu is missing"
    fi
done

# ---- handwritten PTX ----------------------------------------------------------
for src in "$here"/ptx/*.ptx; do
    name="$(basename "$src")"
    claim "$name" "$src" || continue
    if cp "$src" "$outdir/$name"; then
        produced_ok "$outdir/$name"
    else
        fail "copy $src"
    fi
done

# ---- LLVM IR through llc ------------------------------------------------------------
ll_files=("$here"/llvm/*.ll)
if [ ${#ll_files[@]} -gt 0 ]; then
    llc=""
    for cand in ${LLC:-} llc llc-14 llc-15 llc-16 llc-17 llc-18 llc-19 llc-20; do
        if command -v "$cand" >/dev/null 2>&1; then
            llc="$(command -v "$cand")"
            break
        fi
    done
    if [ -z "$llc" ]; then
        echo "build_corpus.sh: SKIPPING llvm/*.ll: llc not found" >&2
    elif ! "$llc" --version 2>/dev/null | grep -qE '^[[:space:]]*nvptx64[[:space:]]'; then
        echo "build_corpus.sh: SKIPPING llvm/*.ll: $llc has no nvptx64 target" >&2
    else
        for src in "${ll_files[@]}"; do
            name="$(basename "$src" .ll)"
            out="$outdir/$name.llc.ptx"
            claim "$(basename "$out")" "$src" || continue
            if log="$("$llc" $LLC_FLAGS "$src" -o "$out" 2>&1)"; then
                [ -n "$log" ] && printf '%s\n' "$log" >&2
                produced_ok "$out"
            else
                printf '%s\n' "$log" >&2
                rm -f "$out"
                fail "llc $LLC_FLAGS $src"
            fi
        done
    fi
fi

# ---- optional verification ----------------------------------------------------------
if [ "$verify" = 1 ]; then
    for f in "${produced[@]}"; do
        if ! log="$("$ptxas" -arch=sm_90 "$f" -o /dev/null 2>&1)"; then
            printf '%s\n' "$log" >&2
            fail "ptxas -arch=sm_90 $f"
        fi
        if ! log="$("$ptxas" -c -arch=sm_90 "$f" -o /dev/null 2>&1)"; then
            printf '%s\n' "$log" >&2
            fail "ptxas -c -arch=sm_90 $f"
        fi
    done
    [ "$failures" = 0 ] && echo "verified ${#produced[@]} files with $ptxas" >&2
fi

if [ "$failures" -ne 0 ]; then
    echo "build_corpus.sh: $failures failure(s)" >&2
    exit 1
fi
exit 0
