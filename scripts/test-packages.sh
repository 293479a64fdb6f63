#!/usr/bin/env bash
# test-packages.sh: the packages as their users get them, tested from outside
# the source tree (scripts/test.sh runs it after the gcc build):
#
#   1. `cmake --install` of the build into a scratch prefix, the man page
#      included; tests/consumer found with find_package(taskcache CONFIG),
#      linked against the shared and the static library, and the same
#      source built with pkg-config (shared, and --static against
#      libtaskcache.a): each builds a module twice, the second time from
#      the cache
#   2. the wheel (scripts/build-wheel.sh, into dist/) installed into a fresh
#      virtual environment, which runs tests/python against the library the
#      wheel carries (TASKCACHE_TEST_INSTALLED=1: no TASKCACHE_LIB, no
#      checkout on sys.path)
#
#   scripts/test-packages.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build}
scratch=$(mktemp -d /tmp/taskcache-packages.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

echo "== packages: cmake --install, then a consumer through find_package and pkg-config"
cmake --install "$build" --prefix "$prefix" >/dev/null
if [ ! -f "$prefix/share/man/man1/taskcache.1" ]; then
    echo "test-packages: cmake --install put no man page in share/man/man1" >&2
    exit 1
fi
cmake -S tests/consumer -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/consumer" -j"$(nproc)" >/dev/null
"$scratch/consumer/consumer_shared" "$scratch/cache1"
"$scratch/consumer/consumer_static" "$scratch/cache2"
if ldd "$scratch/consumer/consumer_static" | grep -q libtaskcache; then
    echo "test-packages: consumer_static loads libtaskcache.so: not linked statically" >&2
    exit 1
fi
pc() { PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config "$@" taskcache; }
# shellcheck disable=SC2046  # pkg-config's words are meant to split
cc -o "$scratch/pc_shared" tests/consumer/consumer.c $(pc --cflags --libs)
LD_LIBRARY_PATH=$prefix/lib "$scratch/pc_shared" "$scratch/cache3"
# the archive by name, then what --static says it needs
# shellcheck disable=SC2046
cc -o "$scratch/pc_static" tests/consumer/consumer.c $(pc --cflags) \
    $(pc --static --libs | sed 's/-ltaskcache\b/-l:libtaskcache.a/')
"$scratch/pc_static" "$scratch/cache4"

echo "== packages: the wheel in a fresh virtual environment"
scripts/build-wheel.sh --out dist | tail -1
python3 -m venv "$scratch/venv"
venv_py=$scratch/venv/bin/python
"$venv_py" -m pip install --quiet --disable-pip-version-check dist/taskcache-*manylinux*.whl pytest
# from outside the checkout, so that nothing but the installed package can be imported
(cd "$scratch" && TASKCACHE_TEST_INSTALLED=1 "$venv_py" -m pytest -q -p no:cacheprovider -rs \
    "$root/tests/python")
