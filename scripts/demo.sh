#!/usr/bin/env bash
# demo.sh: sets up a fresh machine (scripts/setup.sh), then runs taskcache
# on the bundled example, examples/physics_step.ptx (120 kernels shaped
# like a physics engine's step, sharing helper functions and globals):
#
#   cold  - empty cache: every unit is compiled
#   warm  - nothing changed: one module record is read
#   edit  - one kernel changed: only its unit is compiled, the rest is reused
#
# and prints the cache statistics, next to one whole-module ptxas run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

tc=build/taskcache
arch=${ARCH:-sm_90}
work=$(mktemp -d /tmp/taskcache-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
cache=$work/cache
input=examples/physics_step.ptx
# the same module with one kernel's code changed (a constant nudged)
python3 bench/gen_module.py --input "$input" --edit 42 -o "$work/edited.ptx" >/dev/null

ms() { date +%s%N; }
run() {
    local label=$1; shift
    local t0; t0=$(ms)
    "$@"
    printf '   %-6s %8.3f s wall\n' "$label" "$(( $(ms) - t0 ))e-9"
}

ptxas=$( { [ -n "${CUDA_HOME:-}" ] && echo "$CUDA_HOME/bin/ptxas"; } || command -v ptxas || echo /usr/local/cuda/bin/ptxas)
echo "== example: $input ($(grep -c '^\.visible \.entry\|^\.entry' "$input") kernels, $(wc -c <"$input") bytes), target $arch, $(nproc) cores"
echo "== whole-module ptxas, for comparison"
run ptxas "$ptxas" -arch="$arch" "$input" -o "$work/ptxas.cubin"
echo "== taskcache"
run cold "$tc" build "$input" -o "$work/cold.cubin" --arch "$arch" --cache-dir "$cache" -v
run warm "$tc" build "$input" -o "$work/warm.cubin" --arch "$arch" --cache-dir "$cache" -v
echo "   before the edit build, explain shows the one unit that will be compiled:"
"$tc" explain "$work/edited.ptx" --arch "$arch" --cache-dir "$cache" | grep -E '^(units:|KERNEL)| no$' | sed 's/^/     /'
run edit "$tc" build "$work/edited.ptx" -o "$work/edit.cubin" --arch "$arch" --cache-dir "$cache" -v
cmp -s "$work/cold.cubin" "$work/warm.cubin" && echo "   warm output is byte-identical to the cold one"
"$tc" build "$work/edited.ptx" -o "$work/edit-fresh.cubin" --arch "$arch" --no-cache
cmp -s "$work/edit.cubin" "$work/edit-fresh.cubin" &&
    echo "   incremental output is byte-identical to a from-scratch build of the edited module"
echo "== cache statistics"
"$tc" stats --cache-dir "$cache"
