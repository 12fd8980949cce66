#!/usr/bin/env bash
# Writes tests/fixtures/models3 and models4. models3: random-weight deepseek4 models made by our
# make-bench-model (--arch deepseek4 --shape fixture, F32 and Q8_0) and what
# the reference engine, llama.cpp, computes on them: logits of every prompt
# (scripts/dump-reference-logits.sh), the MTP block's drafts and a DSpark
# drafter's (make-bench-model --arch dspark; scripts/dump-reference-drafts.sh). See tests/fixtures/models3/README.md.
# models4: random-weight qwen35 and qwen35moe models (--arch qwen35|qwen35moe --shape
# fixture, F32 and Q8_0), the reference's logits and its MTP drafts. See tests/fixtures/models4/README.md.
#
#   scripts/make-fixtures.sh
#
# Needs the reference built by scripts/compare-reference.sh (in
# $KAKEYA_REF_DIR, default ~/.cache/kakeya-reference) and a build of ours with
# the tools (scripts/build.sh -DKAKEYA_TOOLS=ON). Takes about two minutes.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/tests/fixtures/models3
make_model=$repo/build/bin/make-bench-model
[ -x "$make_model" ] || { echo "make-fixtures.sh: build the tools first (scripts/build.sh -DKAKEYA_TOOLS=ON)" >&2; exit 1; }

mkdir -p "$out/prompts"
cp "$repo"/tests/fixtures/models2/prompts/{fox,fib,long,wrap}.txt "$out/prompts/"
for type in F32 Q8_0; do
  name=ds4-$(echo "$type" | tr '[:upper:]' '[:lower:]')
  # The vocabulary of the other fixtures, so that their draft model drafts for these.
  "$make_model" "$out/$name.gguf" --arch deepseek4 --shape fixture --type "$type" \
    --vocab-from "$repo/tests/fixtures/models/tiny-llama-f32.gguf"
  mkdir -p "$out/$name"
  for prompt in fox fib long wrap; do
    n=64
    [ "$prompt" = wrap ] && n=200
    "$repo/scripts/dump-reference-logits.sh" "$out/$name.gguf" "$out/prompts/$prompt.txt" "$n" \
      "$out/$name/$prompt.logits.json"
  done
done
# The DSpark drafter for ds4-f32: 2 stages, block 4, window 8, taps 1 3 5.
"$make_model" "$out/ds4-dspark-f32.gguf" --arch dspark --shape fixture --type F32 \
  --vocab-from "$repo/tests/fixtures/models/tiny-llama-f32.gguf"
mkdir -p "$out/ds4-dspark-f32"
for prompt in fox wrap; do
  n=64
  [ "$prompt" = wrap ] && n=200
  "$repo/scripts/dump-reference-drafts.sh" "$out/ds4-f32.gguf" "$out/prompts/$prompt.txt" "$n" \
    "$out/ds4-f32/$prompt.drafts.json"
  "$repo/scripts/dump-reference-drafts.sh" "$out/ds4-f32.gguf" "$out/prompts/$prompt.txt" "$n" \
    "$out/ds4-dspark-f32/$prompt.drafts.json" --spec-type draft-dspark -md "$out/ds4-dspark-f32.gguf" --n-max 4
done
echo "wrote $out"

out=$repo/tests/fixtures/models4
mkdir -p "$out/prompts"
cp "$repo"/tests/fixtures/models2/prompts/{fox,fib,long,wrap}.txt "$out/prompts/"
for arch in qwen35 qwen35moe; do
  for type in F32 Q8_0; do
    name=$arch-$(echo "$type" | tr '[:upper:]' '[:lower:]')
    "$make_model" "$out/$name.gguf" --arch "$arch" --shape fixture --type "$type" \
      --vocab-from "$repo/tests/fixtures/models/tiny-llama-f32.gguf"
    mkdir -p "$out/$name"
    for prompt in fox fib long wrap; do
      n=64
      # wrap runs 1,098 positions: the recurrent state over a long sequence.
      [ "$prompt" = wrap ] && n=1000
      "$repo/scripts/dump-reference-logits.sh" "$out/$name.gguf" "$out/prompts/$prompt.txt" "$n" \
        "$out/$name/$prompt.logits.json"
    done
  done
  for prompt in fox wrap; do
    n=64
    [ "$prompt" = wrap ] && n=200
    "$repo/scripts/dump-reference-drafts.sh" "$out/$arch-f32.gguf" "$out/prompts/$prompt.txt" "$n" \
      "$out/$arch-f32/$prompt.drafts.json"
  done
done
echo "wrote $out"
