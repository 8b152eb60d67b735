#!/usr/bin/env bash
# Sets up the Node.js peers of the benchmark harness (DuckDB and LanceDB):
#
#   bash bench/peers/setup.sh
#
# installs the versions of package-lock.json (npm ci, else npm install) into
# bench/peers/node_modules (about 300 MB; the native engines come prebuilt
# inside the npm packages, nothing is compiled). Then `go run ./bench` runs the
# peers along with the sluice scenarios. Needs Node.js 20 or later and npm.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: node and npm are needed (Node.js 20 or later)" >&2
  exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "setup: Node.js $(node --version) is too old; 20 or later is needed" >&2
  exit 1
fi

# npm ci installs exactly the lock file. A lock written where the registry
# serves only this platform's prebuilt engines lacks the other platforms'
# optional packages, and npm ci refuses it; npm install then installs the
# same versions (package.json pins them, the lock the rest).
if [ -f package-lock.json ] && npm ci --no-audit --no-fund; then
  :
else
  echo "setup: npm ci failed or no lock file; running npm install" >&2
  npm install --no-audit --no-fund
fi

# A check that both engines load, and the versions installed.
node --input-type=module -e '
import { readFileSync } from "node:fs";
await import("@duckdb/node-api");
await import("@lancedb/lancedb");
await import("apache-arrow");
const v = (p) => JSON.parse(readFileSync(`node_modules/${p}/package.json`)).version;
console.log(`setup: node ${process.version}, @duckdb/node-api ${v("@duckdb/node-api")}, @lancedb/lancedb ${v("@lancedb/lancedb")}, apache-arrow ${v("apache-arrow")}`);
'
