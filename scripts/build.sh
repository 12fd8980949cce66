#!/usr/bin/env bash
# Configures and builds kakeya (Release) into build/; the CLI lands at build/bin/kakeya.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
