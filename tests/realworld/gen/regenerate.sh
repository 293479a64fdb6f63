#!/usr/bin/env bash
# regenerate.sh: rebuilds the PTX kept in tests/realworld/corpus from its
# sources (README.md there says what each generator is and which versions
# made the files in the repository).
#
#   tests/realworld/gen/regenerate.sh [GENERATOR...]
#
# GENERATOR: nvcc-cccl, nvcc-llmc, nvcc-cutlass, clang-cccl, numba, triton, warp
# (default: all),
# quadrants (only on a machine with a GPU and "pip install quadrants", or
# with QUADRANTS_DUMP=DIR naming the PTX physics_qd.py dumped there),
# inductor (only on a machine with a GPU and PyTorch, or with
# INDUCTOR_PTX=DIR naming the folder gen_inductor.py wrote), xla
# (only on a machine with a GPU and JAX for CUDA, or with XLA_PTX=DIR naming
# the folder gen_xla.py wrote).
# Needs: nvcc (CUDA 13.0) for nvcc-*; clang-19 (apt) for clang-cccl;
# numba-cuda (pip "numba-cuda[cu13]") for numba; triton (pip) for triton;
# warp-lang 1.9.1 (pip "warp-lang==1.9.1 numpy"; no GPU needed) for warp;
# llm.c sources in $LLMC_DIR, CUTLASS in $CUTLASS_DIR, else cloned from
# GitHub at the pinned commits.
# Heavy: about 7 minutes of nvcc and 3 of clang on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus=$(cd "$here/.." && pwd)/corpus
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$cuda/bin/nvcc
LLMC_COMMIT=f1e2ace651495b74ae22d45d1723443fd00ecd3a
CUTLASS_COMMIT=7107b05535f8977f5ecb9d01ee203205b1fd9bc4   # CUTLASS 4.7.0
tmp=$(mktemp -d /tmp/taskcache-regen.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

store() {  # store GENERATOR FILE.ptx: compress into the corpus
    mkdir -p "$corpus/$1"
    xz -9e -T1 -c "$2" >"$corpus/$1/$(basename "$2").xz"
    echo "  $1/$(basename "$2").xz: $(grep -c '\.entry' "$2") kernels"
}

gen_nvcc_cccl() {
    echo "== nvcc on CCCL (CUB, Thrust, libcu++) drivers"
    for f in cub_sort cub_reduce_scan cub_select_hist thrust_algorithms; do
        nice "$nvcc" -arch=sm_90 -std=c++17 -ptx "$here/cccl/$f.cu" -o "$tmp/$f.ptx"
        store nvcc-cccl "$tmp/$f.ptx"
    done
    nice "$nvcc" -arch=sm_90 -std=c++17 -rdc=true -ptx "$here/cccl/cub_select_hist.cu" -o "$tmp/cub_select_hist.rdc.ptx"
    store nvcc-cccl "$tmp/cub_select_hist.rdc.ptx"
    "$nvcc" --version | tail -2 >"$corpus/nvcc-cccl/VERSION"
    grep -h "define CUB_VERSION\|define THRUST_VERSION" "$cuda"/include/cccl/cub/version.cuh \
        "$cuda"/include/cccl/thrust/version.h | sed 's/ *\/\/.*//' >>"$corpus/nvcc-cccl/VERSION"
}

gen_nvcc_llmc() {
    echo "== nvcc on llm.c"
    local src=${LLMC_DIR:-}
    if [ -z "$src" ]; then
        src=$tmp/llm.c
        git clone --quiet https://github.com/karpathy/llm.c "$src"
        git -C "$src" checkout --quiet "$LLMC_COMMIT"
    fi
    # flags of llm.c's Makefile (minus host-only ones); the compat header
    # adapts one host call to CUDA 13 (see gen/llmc/cuda13_compat.h)
    local flags=(--use_fast_math -std=c++17 -O3 -arch=sm_90 -ptx -include "$here/llmc/cuda13_compat.h")
    (cd "$src" &&
        nice "$nvcc" "${flags[@]}" train_gpt2.cu -o "$tmp/train_gpt2.ptx" &&
        nice "$nvcc" "${flags[@]}" -rdc=true train_gpt2.cu -o "$tmp/train_gpt2.rdc.ptx" &&
        nice "$nvcc" "${flags[@]}" train_gpt2_fp32.cu -o "$tmp/train_gpt2_fp32.ptx" &&
        nice "$nvcc" "${flags[@]}" -lineinfo profile_gpt2.cu -o "$tmp/profile_gpt2.lineinfo.ptx")
    for f in train_gpt2 train_gpt2.rdc train_gpt2_fp32 profile_gpt2.lineinfo; do
        store nvcc-llmc "$tmp/$f.ptx"
    done
    for cu in "$src"/dev/cuda/*.cu; do
        local b
        b=$(basename "$cu" .cu)
        [ "$b" = nccl_all_reduce ] && continue   # needs MPI and NCCL headers
        (cd "$src/dev/cuda" && nice "$nvcc" "${flags[@]}" "$b.cu" -o "$tmp/dev_$b.ptx")
        store nvcc-llmc "$tmp/dev_$b.ptx"
    done
    cp "$src/LICENSE" "$corpus/nvcc-llmc/LICENSE"
    { echo "llm.c $LLMC_COMMIT"; "$nvcc" --version | tail -2; } >"$corpus/nvcc-llmc/VERSION"
}

gen_nvcc_cutlass() {
    echo "== nvcc on CUTLASS's Hopper GEMMs (sm_90a)"
    local src=${CUTLASS_DIR:-}
    if [ -z "$src" ]; then
        src=$tmp/cutlass
        git init --quiet "$src"
        git -C "$src" fetch --quiet --depth 1 https://github.com/NVIDIA/cutlass "$CUTLASS_COMMIT"
        git -C "$src" checkout --quiet FETCH_HEAD
    fi
    nice "$nvcc" -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -ptx -I "$src/include" \
        "$here/cutlass/sm90_gemms.cu" -o "$tmp/sm90_gemms.ptx" 2>"$tmp/cutlass.log" ||
        { cat "$tmp/cutlass.log" >&2; return 1; }
    store nvcc-cutlass "$tmp/sm90_gemms.ptx"
    cp "$src/LICENSE.txt" "$corpus/nvcc-cutlass/LICENSE"
    { echo "cutlass $CUTLASS_COMMIT ($(sed -n 's/^#define CUTLASS_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
          "$src/include/cutlass/version.h" | paste -sd.))"
      "$nvcc" --version | tail -2; } >"$corpus/nvcc-cutlass/VERSION"
}

gen_clang_cccl() {
    echo "== clang-19 CUDA on the same CCCL drivers"
    local clang=${CLANG:-clang-19}
    # CUDA 13 removed texture_fetch_functions.h, which clang's CUDA wrapper
    # still includes: gen/clang holds an empty one
    for f in cub_reduce_scan cub_select_hist; do
        nice "$clang" -x cuda --cuda-device-only --cuda-gpu-arch=sm_90 -S -O3 -std=c++17 \
            --cuda-path="$cuda" -Wno-unknown-cuda-version -isystem "$here/clang" \
            -isystem "$cuda/include/cccl" "$here/cccl/$f.cu" -o "$tmp/$f.ptx"
        store clang-cccl "$tmp/$f.ptx"
    done
    "$clang" --version | head -1 >"$corpus/clang-cccl/VERSION"
}

gen_numba() {
    echo "== numba-cuda (NVVM)"
    python3 "$here/numba/gen_numba.py" "$tmp/numba"
    for f in "$tmp"/numba/*.ptx; do store numba "$f"; done
    python3 -c "import numba, numba.cuda, llvmlite; from numba.cuda.cudadrv import nvvm
print('numba', numba.__version__); import importlib.metadata as m; print('numba-cuda', m.version('numba-cuda'))
print('NVVM IR', nvvm.NVVM().get_ir_version() if hasattr(nvvm.NVVM(), 'get_ir_version') else '')" \
        >"$corpus/numba/VERSION"
}

gen_triton() {
    echo "== Triton"
    python3 "$here/triton/gen_triton.py" "$tmp/triton" | grep -v '^compiled'
    for f in "$tmp"/triton/*.ptx; do store triton "$f"; done
    python3 -c "import triton; print('triton', triton.__version__)" >"$corpus/triton/VERSION"
}

gen_warp() {
    # warp-lang 1.9.1: its bundled NVRTC (CUDA 12.8) writes PTX ISA 8.7; newer
    # releases bundle a newer NVRTC whose ".version" ptxas 13.0 rejects
    echo "== NVIDIA Warp (its bundled NVRTC, no GPU needed)"
    nice python3 "$here/warp/gen_warp.py" "$tmp/warp"
    for f in "$tmp"/warp/*.ptx; do store warp "$f"; done
    # Warp's Apache 2.0 licence (the wheel's dist-info), and the MIT notice of
    # native/svd.h, whose code wp.svd3 puts into physics_step
    python3 -c "import importlib.metadata as m; d = m.distribution('warp-lang')
print(next(d.locate_file(f) for f in d.files if f.name.startswith('LICENSE')))" |
        xargs -I{} cp {} "$corpus/warp/LICENSE"
    python3 -c "import os, warp; print(os.path.join(os.path.dirname(warp.__file__), 'native', 'svd.h'))" |
        xargs sed -n '/The MIT License/,/^\/\/ SOFTWARE\./{s|^// \{0,1\}||;p}' >"$corpus/warp/LICENSE.svd3"
    { python3 -c "import warp as wp; wp.config.quiet = True; wp.init()
print('warp-lang', wp.__version__); print('NVRTC %d.%d' % wp.context.runtime.toolkit_version)" 2>/dev/null
      # the NVRTC banner and the PTX ISA, from the PTX's header
      tr -d '\0' <"$tmp/warp/physics_step.ptx" |
          sed -n 's|^// *\(Cuda compilation tools.*\)|\1|p; /^\.version/p'; } >"$corpus/warp/VERSION"
}

gen_quadrants() {
    # Quadrants compiles for CUDA only with a driver: run physics_qd.py on a
    # GPU machine, then point QUADRANTS_DUMP at the folder it wrote
    echo "== Quadrants (LLVM NVPTX, needs a GPU)"
    local dump=${QUADRANTS_DUMP:-}
    if [ -z "$dump" ]; then
        dump=$tmp/quadrants
        mkdir -p "$dump"
        (cd "$dump" && python3 "$here/quadrants/physics_qd.py" "$dump") ||
            { echo "regenerate: Quadrants could not compile for CUDA here (no GPU?)"; return 1; }
    fi
    # the dumps are numbered in compile order: name them by their kernels
    for f in "$dump"/quadrants_kernel_nvptx_*.ptx; do
        local first
        first=$(grep -a -m1 -o '\.entry [a-z]*' "$f" | cut -d' ' -f2)
        case $first in
            runtime) cp "$f" "$tmp/runtime.ptx" ;;
            init) cp "$f" "$tmp/init.ptx" ;;
            step) cp "$f" "$tmp/physics_step.ptx" ;;
        esac
    done
    for f in runtime init physics_step; do store quadrants "$tmp/$f.ptx"; done
    python3 -c "import quadrants; print('quadrants', '.'.join(map(str, quadrants.__version__)))" \
        | tail -1 >"$corpus/quadrants/VERSION"
}

gen_inductor() {
    # Inductor compiles for the GPU it finds: run gen_inductor.py on a GPU
    # machine, then point INDUCTOR_PTX at the folder it wrote
    echo "== PyTorch Inductor (Triton, needs a GPU)"
    local out=${INDUCTOR_PTX:-}
    if [ -z "$out" ]; then
        out=$tmp/inductor
        python3 "$here/inductor/gen_inductor.py" "$out" ||
            { echo "regenerate: Inductor could not compile for CUDA here (no GPU?)"; return 1; }
    fi
    for f in gpt_train_step llama_block_bf16; do store inductor "$out/$f.ptx"; done
    cp "$out/VERSION" "$corpus/inductor/VERSION"   # written by gen_inductor.py
}

gen_xla() {
    # XLA compiles for the GPU it finds: run gen_xla.py on a GPU machine,
    # then point XLA_PTX at the folder it wrote
    echo "== XLA through JAX (LLVM NVPTX and Triton, needs a GPU)"
    local out=${XLA_PTX:-}
    if [ -z "$out" ]; then
        out=$tmp/xla
        python3 "$here/xla/gen_xla.py" "$tmp/xla-work" "$out" ||
            { echo "regenerate: XLA could not compile for CUDA here (no GPU?)"; return 1; }
    fi
    for f in "$out"/*.ptx; do store xla "$f"; done
    cp "$out/VERSION" "$corpus/xla/VERSION"   # written by gen_xla.py
}

gens=("$@")
[ ${#gens[@]} -gt 0 ] || gens=(nvcc-cccl nvcc-llmc nvcc-cutlass clang-cccl numba triton warp)   # quadrants, inductor, xla: on a GPU
for g in "${gens[@]}"; do
    case $g in
        nvcc-cccl) gen_nvcc_cccl ;;
        nvcc-llmc) gen_nvcc_llmc ;;
        nvcc-cutlass) gen_nvcc_cutlass ;;
        clang-cccl) gen_clang_cccl ;;
        numba) gen_numba ;;
        triton) gen_triton ;;
        warp) gen_warp ;;
        quadrants) gen_quadrants ;;
        inductor) gen_inductor ;;
        xla) gen_xla ;;
        *) echo "regenerate: unknown generator $g" >&2; exit 2 ;;
    esac
done
