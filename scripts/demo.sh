#!/usr/bin/env bash
# Builds kakeya and generates from a prompt with speculative decoding (a draft
# model proposes, the target verifies). Until the trained demo model is
# shipped, this runs the random-weight fixture models: their text is gibberish
# and their drafts are rarely accepted, but the output is exactly the target's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DKAKEYA_TESTS=OFF -DKAKEYA_BENCH=OFF
models=tests/fixtures/models
set -x
build/bin/kakeya run -m "$models/tiny-llama-f32.gguf" --draft "$models/tiny-draft-f32.gguf" \
  -p "def fibonacci(n):" -n 64 --temp 0
