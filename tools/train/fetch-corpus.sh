#!/bin/sh
# Fetches the second-generation corpus's raw material: the binary .deb of every python3-*
# package of the configured Debian release (bookworm), with apt's ordinary client.
# Debug and documentation packages (-dbg, -dbgsym, -doc) are skipped: they hold no Python source.
#
#     tools/train/fetch-corpus.sh [DIR]        (default /work/corpus; ~1.4 GB of .deb files)
#
# Resumable: packages whose .deb is already in DIR/debs are not fetched again. Nothing here
# runs at the engine's build or run time. Next: tools/train/debian_corpus.py DIR.
set -eu
dir=${1:-/work/corpus}
mkdir -p "$dir/debs"
cd "$dir/debs"
[ "$(id -u)" -eq 0 ] && apt-get update -qq
apt-cache pkgnames python3- | grep -v -E -- '-(dbg|dbgsym|doc)$' | sort > ../packages-wanted.txt
# The package name is the part of the file name before the first '_'.
ls | sed -n 's/_.*\.deb$//p' | sort > ../packages-have.txt
comm -23 ../packages-wanted.txt ../packages-have.txt > ../packages-todo.txt
echo "fetch-corpus: $(wc -l < ../packages-wanted.txt) wanted, $(wc -l < ../packages-todo.txt) to fetch"
# Batches of 200 names, so that one package that cannot be fetched (a virtual name) only
# costs its batch a retry name by name.
split -l 200 ../packages-todo.txt ../batch.
for b in ../batch.*; do
  [ -e "$b" ] || continue
  if ! xargs apt-get download -qq < "$b" 2>>../fetch-errors.log; then
    while read -r p; do apt-get download -qq "$p" 2>>../fetch-errors.log || echo "$p" >> ../fetch-failed.txt; done < "$b"
  fi
  rm -f "$b"
done
echo "fetch-corpus: $(ls | grep -c '\.deb$') .deb files, $(du -sh . | cut -f1) in $dir/debs"
