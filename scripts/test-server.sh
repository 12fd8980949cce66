#!/usr/bin/env bash
# The integration tests of `kakeya serve` with the official openai client (and the
# Ajv schema validator for structured output):
#   scripts/test-server.sh [KAKEYA_BIN]   (default build/bin/kakeya; CTest: server_openai)
# Installs the client from tests/server/package-lock.json with `npm ci` into
# tests/server/node_modules (gitignored) unless the locked version is there.
# Exits 77 (CTest: skipped) with a message when node or the client cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."
export KAKEYA_BIN="${1:-$PWD/build/bin/kakeya}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are not installed: skipping the server integration test (apt-get install nodejs npm)"
  exit 77
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "node $(node --version) is older than 20: skipping the server integration test"
  exit 77
fi
versions='p => ["openai", "ajv"].map(m => { try { return p(m) } catch { return "" } }).join(" ")'
locked=$(node -p "($versions)(m => require('./tests/server/package-lock.json').packages['node_modules/' + m].version)")
installed=$(node -p "($versions)(m => require('./tests/server/node_modules/' + m + '/package.json').version)")
if [ "$installed" != "$locked" ]; then
  if ! (cd tests/server && npm ci --no-audit --no-fund --loglevel=error); then
    echo "npm ci failed (no network?): skipping the server integration test"
    exit 77
  fi
fi
exec node --test --test-reporter=spec tests/server/openai_client.test.mjs tests/server/structured_output.test.mjs
