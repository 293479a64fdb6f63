#!/usr/bin/env bash
# test.sh: sets up a fresh machine (scripts/setup.sh) and runs every test:
#
#   1. gcc release build: C unit tests (ctest) and end-to-end tests (pytest)
#   2. clang build with AddressSanitizer + UndefinedBehaviorSanitizer: the
#      same tests again (-Werror under both compilers)
#
# The gcc build uses the in-process compiler when setup found one; the
# sanitizer build uses ptxas processes, so both backends are tested.
# GPU tests need a GPU and run through scripts/gpu-check.sh; here they are
# reported as skipped. Options: --quick (skip the sanitizer pass).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

scripts/setup.sh
jobs=$(nproc)

echo "== gcc build: unit tests"
ctest --test-dir build --output-on-failure -j"$jobs"
echo "== gcc build: end-to-end tests"
corpus=$(mktemp -d /tmp/taskcache-corpus.XXXXXX)
trap 'rm -rf "$corpus"' EXIT
bash tests/corpus/build_corpus.sh "$corpus" >/dev/null
export TASKCACHE_CORPUS="$corpus"
TASKCACHE_BIN=build/taskcache python3 -m pytest -q tests/e2e
echo "== real-world corpus: every tier against whole-module ptxas, then differential fuzzing (tests/realworld)"
python3 tests/realworld/check.py --taskcache build/taskcache --jobs "$jobs"
python3 tests/realworld/difffuzz.py --taskcache build/taskcache --seconds 80 --seed 1 --seed time --minimize-seconds 20

echo "== Python package"
# numba-cuda drives the package with a real Python GPU compiler; its NVVM is
# pinned to this toolkit's release so ptxas accepts the PTX it emits
cuda_mm=$("${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" --version 2>/dev/null |
          sed -n 's/.*release \([0-9]*\.[0-9]*\),.*/\1/p')
if [ -n "$cuda_mm" ] && ! python3 -c "import numba.cuda" 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check "numba-cuda[cu${cuda_mm%%.*}]" \
        "cuda-toolkit[cccl,cudart,nvrtc,nvvm]==${cuda_mm}.*" ||
        echo "test: note: numba-cuda could not be installed; its test will be skipped"
fi
TASKCACHE_LIB=build/libtaskcache.so python3 -m pytest -q -rs tests/python
# taskcache.warp against the pinned warp-lang releases it supports (1.19.0 and
# the minor before it), each in a directory of its own, with NVIDIA's ptxas
# and nvJitLink of their NVRTC's release (13.4.92); no GPU: Warp's
# ahead-of-time compile takes the same path
pipi() { python3 -m pip install --quiet --disable-pip-version-check "$@" 2>/dev/null ||
         python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$@"; }
python3 -c "import numpy" 2>/dev/null || pipi numpy || echo "test: note: numpy could not be installed"
tools=.deps/warp-tools
[ -x "$tools/nvidia/cu13/bin/ptxas" ] ||
    pipi --no-deps --target "$tools" nvidia-cuda-nvcc==13.4.92 nvidia-nvjitlink==13.4.92 ||
    echo "test: note: NVIDIA's 13.4 ptxas could not be installed; the Warp tests will be skipped"
for v in 1.19.0 1.18.0; do
    site=.deps/warp-$v
    [ -d "$site/warp" ] || pipi --no-deps --target "$site" "warp-lang==$v" ||
        echo "test: note: warp-lang $v could not be installed; its tests will be skipped"
    echo "== taskcache.warp with warp-lang $v"
    TASKCACHE_WARP_SITE=$site TASKCACHE_WARP_TOOLS=$tools TASKCACHE_LIB=build/libtaskcache.so \
        python3 -m pytest -q -rs tests/python/test_warp.py
done
# the packages as users get them: cmake --install + find_package / pkg-config
# consumers, and the wheel in a fresh virtual environment
scripts/test-packages.sh build

echo "== torture, quick mode (scripts/torture.py --long for the full run)"
python3 scripts/torture.py --quick

if [ "$quick" = 0 ]; then
    # gcc warns at -O0 where it does not at -O2 (format truncation): the
    # quality bar is -Werror under both compilers in every build type
    echo "== gcc debug build (-Werror)"
    cmake -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug -DTASKCACHE_NVPTXCOMPILER=OFF >/dev/null
    cmake --build build-debug -j"$jobs" >/dev/null

    echo "== clang + ASan/UBSan build"
    # the sanitizer pass also covers the ptxas-process backend
    CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTASKCACHE_SANITIZE=ON \
        -DTASKCACHE_NVPTXCOMPILER=OFF >/dev/null
    cmake --build build-asan -j"$jobs" >/dev/null
    # intercept_tls_get_addr=0: clang 14's runtime records the dynamic TLS
    # of libraries loaded with dlopen (GnuTLS, under the libcurl the WebDAV
    # tier opens) with a bogus range now and then, and LeakSanitizer then
    # crashes scanning it at exit ("Tracer caught signal 11", DTLS at
    # 0x1133; 3 runs in 12 of the WebDAV sharing test). Without the
    # interception it does not scan dynamic TLS, which none of our code
    # uses; leaks are still found everywhere else.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0
    ctest --test-dir build-asan --output-on-failure -j"$jobs"
    UBSAN_OPTIONS=print_stacktrace=1 \
        LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp TASKCACHE_BIN=build-asan/taskcache python3 -m pytest -q tests/e2e
    unset ASAN_OPTIONS
fi

if [ "$quick" = 0 ]; then
    echo "== fuzzers, 30 seconds each on the seed corpora (tests/fuzz/README.md: long runs)"
    CC=clang cmake -S . -B build-fuzz -DTASKCACHE_FUZZ=ON -DTASKCACHE_NVPTXCOMPILER=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build build-fuzz -j"$jobs" --target fuzz_ptx fuzz_record fuzz_ptxas_args fuzz_remote \
        fuzz_compiler_output >/dev/null
    for t in ptx record ptxas_args remote compiler_output; do
        scratch=$(mktemp -d /tmp/taskcache-fuzz.XXXXXX)
        rc=0
        build-fuzz/tests/fuzz/fuzz_$t -max_total_time=30 -timeout=10 -rss_limit_mb=2048 \
            -max_len=65536 -print_final_stats=1 "$scratch" tests/fuzz/corpus_$t \
            >"$scratch.log" 2>&1 || rc=$?
        grep -E "^stat::number_of_executed_units" "$scratch.log" | sed "s/^/fuzz_$t: /"
        if [ "$rc" != 0 ]; then
            tail -40 "$scratch.log"
            echo "fuzz_$t found a problem"
            exit 1
        fi
        rm -rf "$scratch" "$scratch.log"
    done
fi

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "== a GPU is present: run scripts/gpu-check.sh for the GPU tests"
else
    echo "== GPU tests: SKIPPED (no GPU here; they run through scripts/gpu-check.sh on a GPU machine)"
fi
echo "== all tests passed"
