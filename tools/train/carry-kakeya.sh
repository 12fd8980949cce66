#!/bin/sh
# Copies build/bin/kakeya and the shared libraries it loads (all but the C library's own) into
# DIR, for a machine without the Debian packages it was built against, such as the GPU image,
# where --prompts-from tokenizes with it: run it there with LD_LIBRARY_PATH=DIR/lib.
#     tools/train/carry-kakeya.sh DIR [build/bin/kakeya]
set -eu
dir=${1:?usage: carry-kakeya.sh DIR [KAKEYA]}
bin=${2:-build/bin/kakeya}
mkdir -p "$dir/lib"
cp "$bin" "$dir/kakeya"
ldd "$bin" | awk '$3 ~ /^\// {print $3}' | grep -v -E '/(libc|libm|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$dir/lib/"; done
ls "$dir/lib"
