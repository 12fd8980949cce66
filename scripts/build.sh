#!/usr/bin/env bash
# Configures and builds kakeya (Release) into build/; the CLI lands at build/bin/kakeya.
#   scripts/build.sh [-DOPTION=VALUE ...] [--target TARGET]
# -D options go to CMake (and stay in build/'s cache); --target builds only
# that target (the demo builds only the CLI, leaving the cached options alone,
# so that a later `ctest --test-dir build` never runs test binaries a build
# with the tests switched off left behind).
set -euo pipefail
cd "$(dirname "$0")/.."
options=()
target=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) target=(--target "$2"); shift 2 ;;
    *) options+=("$1"); shift ;;
  esac
done
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${options[@]}" >/dev/null
cmake --build build -j"$(nproc)" "${target[@]}"
