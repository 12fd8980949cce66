#!/usr/bin/env bash
# Builds kakeya and runs every test: the unit/parity suites (Release), the same
# unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, and a short
# libFuzzer run of the GGUF reader. Pass --quick to run only the Release suite.
# --tsan instead builds build-tsan and runs the unit tests (not the Slow ones)
# under ThreadSanitizer: the thread pool, the threaded matmuls and the
# speculative loop. Not part of CI (7 min from a clean build-tsan on 2 cores,
# 5 of them the tests); run it after touching threads.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

if [ "${1:-}" = "--tsan" ]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAKEYA_BENCH=OFF \
    -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
  cmake --build build-tsan -j"$jobs"
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -j"$jobs" -E 'Slow'
  exit 0
fi

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
