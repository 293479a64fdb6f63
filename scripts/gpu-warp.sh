#!/usr/bin/env bash
# gpu-warp.sh: stock NVIDIA Warp against taskcache.warp on the GPU machine
# (bench/warp_jit.py), from files carried there in three calls, because
# Warp's native library alone is larger than one call may carry.
#
# Here, once (what the calls carry, under .gpudeps/, which git ignores):
#   a/  warp.so.xz.part-aa, ptxas134.xz           (NVIDIA's nvidia-cuda-nvcc 13.4.92: bin/ptxas)
#   b/  warp.so.xz.part-ab, warp-rest.tar.xz      (warp-lang 1.19.0 without its .so files),
#       newton.tar.xz (newton 1.8.0), libtaskcache.so.xz (cmake -DTASKCACHE_NVPTXCOMPILER=OFF
#       -DTASKCACHE_STATIC_DEPS=ON, stripped; build it again after every change to the C
#       library: the Python package calls what the library exports, and with an older one
#       taskcache.warp hands every module to stock Warp, which bench/warp_jit.py reports)
#   c/  nvjitlink134.xz (nvidia-nvjitlink 13.4.92: libnvJitLink.so.13), warp-clang.so.xz
# There, one call after the other while the machine is warm:
#   scripts/gpu-warp.sh stage a        (carry .gpudeps/a)
#   scripts/gpu-warp.sh stage b        (carry .gpudeps/b)
#   scripts/gpu-warp.sh run [bench/warp_jit.py options]   (carry .gpudeps/c)
set -euo pipefail
cd "$(dirname "$0")/.."
W=/tmp/gpu-warp
mkdir -p "$W"
case "${1:-}" in
stage)
    cp ".gpudeps/$2"/* "$W"/
    ls -la "$W"
    ;;
run)
    shift
    cp .gpudeps/c/* "$W"/ 2>/dev/null || true  # a second run finds them there
    site=$W/site tools=$W/tools
    rm -rf "$site" "$tools"
    mkdir -p "$site" "$tools/nvidia/cu13/bin" "$tools/nvidia/cu13/lib"
    tar -C "$site" -xJf "$W/warp-rest.tar.xz"
    tar -C "$site" -xJf "$W/newton.tar.xz"
    mkdir -p "$site/warp/bin"
    cat "$W"/warp.so.xz.part-* | xz -d > "$site/warp/bin/warp.so"
    xz -dc "$W/warp-clang.so.xz" > "$site/warp/bin/warp-clang.so"
    xz -dc "$W/ptxas134.xz" > "$tools/nvidia/cu13/bin/ptxas"
    chmod +x "$tools/nvidia/cu13/bin/ptxas"
    xz -dc "$W/nvjitlink134.xz" > "$tools/nvidia/cu13/lib/libnvJitLink.so.13"
    xz -dc "$W/libtaskcache.so.xz" > "$W/libtaskcache.so"
    export PYTHONPATH=$PWD/python:$site:$tools TASKCACHE_LIB=$W/libtaskcache.so
    export PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    nproc
    "$tools/nvidia/cu13/bin/ptxas" --version | tail -2
    python3 -c "import warp as wp; wp.init(); print('warp', wp.config.version)"
    out=${OUT:-/tmp}
    python3 bench/warp_jit.py --work "$W/work" --json "$out/warp_jit.json" "$@" 2>&1 |
        tee "$out/warp_jit.txt"
    ;;
*)
    echo "usage: scripts/gpu-warp.sh stage a|b | run [bench/warp_jit.py options]" >&2
    exit 2
    ;;
esac
