#!/usr/bin/env bash
# Builds kakeya and runs every test: the unit/parity suites (Release), the same
# unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, and a short
# libFuzzer run of the GGUF reader. Pass --quick to run only the Release suite.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

scripts/build.sh -DKAKEYA_TESTS=ON -DKAKEYA_BENCH=ON
echo "== tests (Release)"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "$quick" -eq 0 ]; then
  echo "== unit tests under ASan + UBSan"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAKEYA_SANITIZE=ON \
    -DKAKEYA_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -E 'Slow'
  echo "== fuzzing the GGUF reader"
  scripts/fuzz-gguf.sh "${KAKEYA_FUZZ_SECONDS:-60}"
fi
