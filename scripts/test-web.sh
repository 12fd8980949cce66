#!/usr/bin/env bash
# The browser test of the chat page `kakeya serve` serves at / (web/, ADR 0020):
#   scripts/test-web.sh [KAKEYA_BIN]   (default build/bin/kakeya, built if missing)
# Drives Debian's chromium with puppeteer-core (tests/web/package-lock.json,
# installed with `npm ci` into tests/web/node_modules, gitignored) against the
# shipped model, and writes the screenshot docs/web-chat.png. Installs
# chromium with apt-get when it is missing (as root). Exits non-zero on any
# failure, including a missing browser or package: a skipped browser test
# would read as a passed one.
set -euo pipefail
cd "$(dirname "$0")/.."
export KAKEYA_BIN="${1:-$PWD/build/bin/kakeya}"
export CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
export SCREENSHOT="${SCREENSHOT:-$PWD/docs/web-chat.png}"

if [ ! -x "$KAKEYA_BIN" ]; then
  scripts/build.sh --target kakeya
fi
if [ -z "$CHROMIUM" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "chromium is not installed: run 'apt-get install chromium' as root, or set CHROMIUM=/path/to/chrome" >&2
    exit 1
  fi
  apt-get install -y --no-install-recommends chromium || { apt-get update && apt-get install -y --no-install-recommends chromium; }
  CHROMIUM=$(command -v chromium)
fi
command -v node >/dev/null && command -v npm >/dev/null || { echo "node and npm are needed (apt-get install nodejs npm)" >&2; exit 1; }

locked=$(node -p 'require("./tests/web/package-lock.json").packages["node_modules/puppeteer-core"].version')
installed=$(node -p 'try { require("./tests/web/node_modules/puppeteer-core/package.json").version } catch { "" }')
if [ "$installed" != "$locked" ]; then
  (cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
fi
exec node --test --test-concurrency=1 --test-reporter=spec tests/web/chat_page.test.mjs
