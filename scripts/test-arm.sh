#!/usr/bin/env bash
# Cross-compiles kakeya for 64-bit ARM Linux and runs its tests under
# qemu-user, once per ARM CPU target forced (KAKEYA_CPU_TARGET = neon_i8mm,
# neon_dotprod, neon; ADR 0011). qemu's -cpu max has the dot-product and i8mm
# extensions, so every path runs. Installs what it needs on Debian 12: the
# cross compiler, qemu-user and the arm64 libraries (multiarch).
#   scripts/test-arm.sh           the Release suite but the *Sweep* tests, per target
#   scripts/test-arm.sh --quick   the kernel, parity and speculative identity
#                                 tests (no *Slow* ones), per target
#   scripts/test-arm.sh --target T   one target only (with or without --quick)
#   scripts/test-arm.sh --kernels      builds only the kernel tests and runs them
#                                 once: they run every ARM target themselves;
#                                 with them cross_target_test on five models,
#                                 against the x86 build's hashes (CI's ARM part)
#   scripts/test-arm.sh --clang        compiles the engine (its libraries and
#                                 the kakeya binary) with clang 14 for aarch64,
#                                 running nothing: clang is the compiler family
#                                 of macOS, and it refuses code GCC accepts
#                                 (in CI, about 2 minutes on 2 cores)
# Expect ten to twenty times the native time per target (qemu emulates every
# instruction): --quick (439 tests) took 46 min for neon_i8mm and 51 min for
# neon_dotprod on 2 Zen 1 cores, and (440 tests) 38 min for plain neon on 2
# Zen 4 cores; the whole suite (without *Sweep*) took 102 min for neon_i8mm on 2
# Zen 4 cores (session 21: 266 tests beyond --quick in 70, --quick's 441 in 32),
# and 114 min for neon_dotprod's 710 (session 22, the cores shared with a build).
# One test, SpeculativeLosslessSlow.RingWrapsRepresentativeBlockSizes, takes
# 30 to 60 min of one core under qemu: the suite cannot finish sooner.
# Timings under qemu mean nothing; scripts/tile-instructions.py compares the
# tiles' instruction counts per weight byte instead.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
kernels=0
clang=0
targets=(neon_i8mm neon_dotprod neon)
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --kernels) kernels=1; shift ;;
    --clang) clang=1; shift ;;
    --target) targets=("$2"); shift 2 ;;
    *) echo "usage: scripts/test-arm.sh [--quick | --kernels | --clang] [--target neon_i8mm|neon_dotprod|neon]" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)

scripts/install-deps.sh  # the host's tools and header-only libraries
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
arm_packages=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libpcre2-dev:arm64 libgtest-dev:arm64
              libcpp-httplib-dev:arm64)
missing=()
for p in "${arm_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kakeya: installing ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$clang" -eq 1 ]; then
  echo "== the engine compiled by clang for aarch64 (cmake/aarch64-linux-gnu-clang.cmake)"
  cmake -S . -B build-arm-clang -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu-clang.cmake \
    -DCMAKE_BUILD_TYPE=Release -DKAKEYA_BENCH=OFF >/dev/null
  cmake --build build-arm-clang -j"$jobs" --target kakeya
  exit 0
fi
cmake -S . -B build-arm -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DKAKEYA_BENCH=OFF >/dev/null

# The same bits as x86 (ADR 0014): the x86 build of cross_target_test writes
# one hash per model, and the ARM build, under qemu, checks its own against
# them (KAKEYA_EXPECT_TARGET_HASHES reaches the tests through ctest and qemu).
# --kernels checks one model of each kind of float path: F16 and BF16 weights,
# a K-quant, gemma 2 (soft-capping, sliding window, GELU) and a mixture.
cross_models=(tiny_llama_f16 tiny_llama_bf16 tiny_llama_q4_k_m tiny_gemma2_f32 q3moe_f16)
cross_names=()
for m in "${cross_models[@]}"; do cross_names+=("Fixtures/CrossTargetTest.SameBitsOnEveryTarget/$m"); done
export KAKEYA_EXPECT_TARGET_HASHES="$PWD/build-arm/x86-target-hashes.txt"
write_x86_hashes() {  # $1: a gtest filter
  [ -x build/bin/cross_target_test ] || scripts/build.sh -DKAKEYA_TESTS=ON --target cross_target_test
  rm -f "$KAKEYA_EXPECT_TARGET_HASHES"
  echo "== cross_target_test (x86) writes the hashes the ARM targets must match"
  KAKEYA_WRITE_TARGET_HASHES="$KAKEYA_EXPECT_TARGET_HASHES" build/bin/cross_target_test --gtest_filter="$1" \
    --gtest_brief=1
}

if [ "$kernels" -eq 1 ]; then
  write_x86_hashes "$(IFS=:; echo "${cross_names[*]}")"
  cmake --build build-arm -j"$jobs" --target matmul_test ops_test dequant_test cross_target_test
  echo "== kernel tests and the ARM bits of ${cross_models[*]} under qemu-aarch64 -cpu max (each runs every ARM target)"
  ctest --test-dir build-arm --output-on-failure -j"$jobs" \
    -R "^(MatMul|Ops|RmsNorm|AttendKvHead|GeluMul|SiluMul|Dequant|$(IFS='|'; echo "${cross_names[*]}"))"
  exit 0
fi
write_x86_hashes 'Fixtures/CrossTarget*:CrossTarget*'
cmake --build build-arm -j"$jobs"

# The tests that run every CPU target themselves, the model parity against
# the reference engine's fixtures, and speculative decoding's byte identity.
quick_tests='^([A-Za-z0-9_]+/)?(MatMul|Ops|RmsNorm|AttendKvHead|GeluMul|SiluMul|Dequant|CrossTarget|BatchInvariance|Reference|Gemma4|SyntheticGemma4|ModelParity|ModelFixtures|Speculative|SeededIdentity|Verify|DraftModel|NgramDrafter|Mtp|DFlash|Assistant|NoAllocation)'
for target in "${targets[@]}"; do
  echo "== tests under qemu-aarch64 -cpu max, KAKEYA_CPU_TARGET=$target"
  if [ "$quick" -eq 1 ]; then
    KAKEYA_CPU_TARGET="$target" ctest --test-dir build-arm --output-on-failure -j"$jobs" -R "$quick_tests" -E 'Slow|Sweep'
  else
    KAKEYA_CPU_TARGET="$target" ctest --test-dir build-arm --output-on-failure -j"$jobs" -E 'Sweep'
  fi
done
