#!/usr/bin/env bash
# setup.sh: installs what taskcache needs to build and test on a fresh
# Debian/Ubuntu machine, then configures and builds it in ./build.
#
#   scripts/setup.sh            packages + release build in build/
#
# Debian packages: cmake, gcc, clang, pkg-config, libssl-dev (libcrypto for
# SHA-256), libzstd-dev. Python: pytest (from PyPI) for the end-to-end
# tests. The CUDA toolkit (ptxas, nvlink, libnvJitLink) is found, not
# installed: /usr/local/cuda, $CUDA_HOME, or PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in cmake make gcc clang pkg-config libssl-dev libzstd-dev; do
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

if ! command -v ptxas >/dev/null && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" ]; then
    echo "setup: warning: the CUDA toolkit (ptxas) was not found; set CUDA_HOME" >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "setup: built build/taskcache ($(build/taskcache version))"
