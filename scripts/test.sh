#!/usr/bin/env bash
# Builds kakeya and runs the tests (CI's run): the unit/parity suites (Release;
# all but the long *Sweep* tests, see --slow), the same unit tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, a short libFuzzer run of the
# GGUF reader, and the kernel tests cross-built for ARM64 and run under qemu
# (every ARM target; the whole suite under qemu is scripts/test-arm.sh, hours,
# not in CI). Pass --quick to run only the Release suite.
# --slow builds the Release suite and runs only the long sweeps that CI leaves
# out (tests named *Sweep*: every block size over 2,000 tokens across ring
# wraps, the shipped drafters over 1,500 tokens; about 5 min on 2 cores). CI
# runs a smaller form of each (the *Slow* tests beside them); run --slow after
# touching the speculative loop, the drafters or the KV cache rings.
# --tsan instead builds build-tsan and runs the unit tests (not the Slow or
# Sweep ones) under ThreadSanitizer: the thread pool, the threaded matmuls and
# the speculative loop. Not part of CI (7 min from a clean build-tsan on 2 cores,
# 5 of them the tests); run it after touching threads.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

if [ "${1:-}" = "--slow" ]; then
  scripts/build.sh -DKAKEYA_TESTS=ON -DKAKEYA_BENCH=ON
  ctest --test-dir build --output-on-failure -j"$jobs" -R 'Sweep'
  exit 0
fi

if [ "${1:-}" = "--tsan" ]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAKEYA_BENCH=OFF \
    -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
  cmake --build build-tsan -j"$jobs"
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -j"$jobs" -E 'Slow|Sweep'
  exit 0
fi

scripts/build.sh -DKAKEYA_TESTS=ON -DKAKEYA_BENCH=ON
echo "== tests (Release)"
ctest --test-dir build --output-on-failure -j"$jobs" -E 'Sweep'

if [ "$quick" -eq 0 ]; then
  echo "== unit tests under ASan + UBSan"
  # Only what the tests run: no benchmarks or tools; -g1 (line tables, inlined
  # frames included) is all a sanitizer report's stack needs. This build runs
  # on this CPU only, so without AVX-512 it leaves out the AVX-512 kernels,
  # which it could not run (the Release build above compiles them).
  avx512=ON
  grep -qw avx512f /proc/cpuinfo 2>/dev/null || avx512=OFF
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAKEYA_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DKAKEYA_BENCH=OFF -DKAKEYA_TOOLS=OFF \
    -DKAKEYA_AVX512="$avx512" >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -E 'Slow|Sweep'
  echo "== fuzzing the GGUF reader"
  scripts/fuzz.sh gguf "${KAKEYA_FUZZ_SECONDS:-60}"
  echo "== fuzzing the chat-template engine"
  scripts/fuzz.sh jinja "${KAKEYA_FUZZ_SECONDS:-60}"
  echo "== fuzzing the tokenizers"
  scripts/fuzz.sh tokenizer "${KAKEYA_FUZZ_SECONDS:-60}"
  echo "== fuzzing the grammars and JSON schemas of constrained decoding"
  scripts/fuzz.sh grammar "${KAKEYA_FUZZ_SECONDS:-60}"
  echo "== fuzzing the server's request bodies"
  scripts/fuzz.sh request "${KAKEYA_FUZZ_SECONDS:-60}"
  echo "== ARM64: the kernel tests cross-built and run under qemu (scripts/test-arm.sh --kernels)"
  scripts/test-arm.sh --kernels
  echo "== ARM64 with clang, the compiler family of macOS: the engine compiles (scripts/test-arm.sh --clang)"
  scripts/test-arm.sh --clang
fi
