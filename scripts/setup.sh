#!/usr/bin/env bash
# setup.sh: installs what taskcache needs to build and test on a fresh
# Debian/Ubuntu machine, then configures and builds it in ./build.
#
#   scripts/setup.sh            packages + release build in build/
#
# Debian packages: cmake, gcc, clang, pkg-config, libssl-dev (libcrypto for
# SHA-256), libzstd-dev; for the remote tier libcurl4-openssl-dev (HTTP) and
# libhiredis-dev (Redis), and the servers its tests start on loopback ports:
# redis-server (with redis-cli) and nginx (WebDAV). Python: pytest (from PyPI) for the end-to-end
# tests. The CUDA toolkit (ptxas, nvlink, libnvJitLink) is found, not
# installed: $CUDA_HOME or /usr/local/cuda, or PATH. When the toolkit lacks
# libnvptxcompiler_static, the matching nvidia-nvptxcompiler wheel is
# fetched from PyPI into .deps/ (TASKCACHE_NO_INPROCESS=1 skips that).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in cmake make gcc clang pkg-config libssl-dev libzstd-dev \
           libcurl4-openssl-dev libhiredis-dev redis-server redis-tools nginx; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
    echo "setup: installing ${need[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
    echo "setup: installing python3 and pip"
    $([ "$(id -u)" -eq 0 ] || echo sudo) apt-get install -y -qq --no-install-recommends python3 python3-pip >/dev/null
fi
if ! python3 -c "import pytest" 2>/dev/null; then
    echo "setup: installing pytest"
    python3 -m pip install --quiet --disable-pip-version-check pytest 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pytest
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
ptxas=$cuda/bin/ptxas
[ -x "$ptxas" ] || ptxas=$(command -v ptxas || true)
nvptx_root=""
if [ -z "$ptxas" ]; then
    echo "setup: warning: the CUDA toolkit (ptxas) was not found; set CUDA_HOME" >&2
elif [ ! -f "$cuda/lib64/libnvptxcompiler_static.a" ] && [ "${TASKCACHE_NO_INPROCESS:-0}" != 1 ]; then
    # The in-process compiler of the same release as ptxas, from NVIDIA's
    # nvidia-nvptxcompiler wheel on PyPI (full toolkits ship it; this one
    # does not). Without it taskcache compiles with ptxas processes.
    ver=$("$ptxas" --version | sed -n 's/.*, V\([0-9][0-9.]*\)$/\1/p')
    dir=.deps/nvptxcompiler-$ver
    if [ -n "$ver" ] && [ ! -d "$dir" ]; then
        echo "setup: fetching nvidia-nvptxcompiler==$ver (in-process compiler)"
        mkdir -p .deps/wheels
        if python3 -m pip download --quiet --disable-pip-version-check --no-deps \
                --only-binary=:all: -d .deps/wheels "nvidia-nvptxcompiler==$ver" 2>/dev/null; then
            python3 -m zipfile -e .deps/wheels/nvidia_nvptxcompiler-"$ver"-*.whl "$dir"
        else
            echo "setup: note: nvidia-nvptxcompiler==$ver unavailable; using ptxas processes"
        fi
    fi
    for d in "$dir"/nvidia/cu*; do
        [ -f "$d/lib/libnvptxcompiler_static.a" ] && nvptx_root=$PWD/$d
    done
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    ${nvptx_root:+-DTASKCACHE_NVPTXCOMPILER_ROOT="$nvptx_root"} >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "setup: built build/taskcache ($(build/taskcache version))"
