#!/bin/sh
# compile_sources.sh - every CUDA C++ source of the GPU suite and of
# scripts/bench compiles (nvcc -c), so that a program that only ever runs on
# a machine with a GPU cannot break unseen on the machines without one.
# Exit 77 (meson: skipped) where there is no nvcc.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "no nvcc: not checked"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
for src in "$repo"/tests/gpu/*.cu "$repo"/scripts/benchmarks/*.cu; do
  if "$nvcc" -std=c++17 -c -o "$out/x.o" "$src" >"$out/log" 2>&1; then
    echo "ok      ${src#"$repo"/}"
  else
    echo "FAILED  ${src#"$repo"/}"
    sed 's/^/        /' "$out/log" | head -n 20
    failed=1
  fi
done
exit $failed
