# shellcheck shell=bash
# Sourced by the scripts/dump-reference-*.sh: builds one of our programs
# against the reference engine (llama.cpp as scripts/compare-reference.sh
# builds it in $KAKEYA_REF_DIR, default ~/.cache/kakeya-reference, outside the
# repository) and sets $binary to it.
#
#   reference_tool NAME [g++ flags...]
#
# compiles tools/reference/NAME.cpp into $KAKEYA_REF_DIR/bin/NAME when that is
# missing or older than the source, with the reference's headers and an rpath
# to its shared libraries, so that the program runs exactly the reference's
# build. Extra flags (e.g. -lllama-common) come before the core libraries.
reference_tool() {
  local name=$1
  shift
  local repo scratch llama libs source
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  scratch=${KAKEYA_REF_DIR:-$HOME/.cache/kakeya-reference}
  llama=$scratch/llama.cpp
  libs=$llama/build/bin
  source=$repo/tools/reference/$name.cpp
  binary=$scratch/bin/$name
  if [ ! -f "$llama/include/llama.h" ] || [ ! -e "$libs/libllama.so" ]; then
    echo "$name: no llama.cpp build in $llama; run scripts/compare-reference.sh once to build it" >&2
    exit 1
  fi
  if [ ! -x "$binary" ] || [ "$source" -nt "$binary" ]; then
    mkdir -p "$scratch/bin"
    g++ -O2 -std=c++17 -o "$binary.tmp" "$source" \
        -I"$llama/include" -I"$llama/ggml/include" -I"$llama/common" \
        -L"$libs" -Wl,-rpath,"$libs" "$@" -lllama -lggml -lggml-base
    mv "$binary.tmp" "$binary"  # a failed build never leaves a binary that looks current
  fi
}
