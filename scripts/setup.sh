#!/usr/bin/env bash
# npm run setup — idempotent set-up on a fresh Debian/Ubuntu machine with Node >= 20:
# installs nats-server (JetStream) and the PostgreSQL server binaries when missing (through
# apt as root; otherwise prints the exact command), then `npm ci` and the build.
set -euo pipefail
cd "$(dirname "$0")/.."

node_major=$(node -p 'process.versions.node.split(".")[0]')
if (( node_major < 20 )); then
  echo "setup: Node >= 20 is required (found $(node -v))" >&2
  exit 1
fi

missing=()
if ! command -v nats-server >/dev/null 2>&1 && [[ -z "${NATS_SERVER_BIN:-}" ]]; then
  missing+=(nats-server)
fi
if [[ -z "${PG_BIN_DIR:-}" ]] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi

if (( ${#missing[@]} )); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${missing[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing ${missing[*]}. Install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

nats_bin=${NATS_SERVER_BIN:-nats-server}
echo "setup: $("$nats_bin" --version)"
echo "setup: PostgreSQL $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || echo "${PG_BIN_DIR}")"

npm ci --no-audit --no-fund
npm run build
echo "setup: done"
