#!/usr/bin/env bash
# Installs the Debian 12 packages kakeya builds with (skips those already there).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config python3
  libhwy-dev libpcre2-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  libgtest-dev libbenchmark-dev
  clang libclang-rt-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "kakeya: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
