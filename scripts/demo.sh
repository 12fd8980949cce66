#!/usr/bin/env bash
# Builds kakeya and generates from a prompt. Until the shipped demo model
# exists, this runs a random-weight fixture model (its text is gibberish).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DKAKEYA_TESTS=OFF -DKAKEYA_BENCH=OFF
model=tests/fixtures/models/tiny-llama-f32.gguf
set -x
build/bin/kakeya run -m "$model" -p "def fibonacci(n):" -n 64 --temp 0
