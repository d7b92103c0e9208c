#!/usr/bin/env bash
# npm run setup — idempotent set-up on a fresh Debian/Ubuntu machine with Node >= 20:
# installs nats-server >= 2.15.1 (JetStream), the PostgreSQL server binaries, Chromium, curl, haproxy,
# promtool, iproute2 and iptables when missing (through apt as root; otherwise prints the exact command), then `npm ci` and the build.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: npm run setup

Installs the system packages Spate's tests and npm start need when they are missing (the
PostgreSQL server binaries, Chromium and the tools the tests run, with apt-get as root; and
nats-server >= 2.15.1, Debian testing's binary into /usr/local/bin when the one found is older),
otherwise it prints the commands to run; then npm ci and the build. Safe to run again.
NATS_SERVER_BIN, PG_BIN_DIR and CHROMIUM_BIN point it at binaries installed elsewhere."
case "${1:-}" in
  '') ;;
  -h | --help) echo "$usage"; exit 0 ;;
  *) printf 'unknown option: %s\n\n%s\n' "$1" "$usage" >&2; exit 2 ;;
esac

node_major=$(node -p 'process.versions.node.split(".")[0]')
if (( node_major < 20 )); then
  echo "setup: Node >= 20 is required (found $(node -v))" >&2
  exit 1
fi

# nats-server: Debian bookworm's 2.9.10 loses acknowledged messages after a partition (a stream's
# replica comes back desynchronised), and trixie's 2.10.27 keeps a node's /healthz failing for good
# after one (ephemeral consumers assigned to it while it was cut off, never created; docs/multihost.md,
# "What the rig found"). Spate needs 2.15.1, Debian testing's (a static Go binary that runs on
# bookworm): setup fetches its package from Debian's archive, checks it against the SHA-256 pinned
# here and installs the binary.
NATS_SERVER_MIN=2.15.1
NATS_SERVER_DEB=pool/main/n/nats-server/nats-server_2.15.1-1_amd64.deb
NATS_SERVER_DEB_SHA256=31ef4ceaa84e8248d449e508472e3770c17c3695cb5cb0ee96e03912724ea884
# The pool keeps a file only while a suite lists it: snapshot.debian.org keeps it for good, by SHA-1.
NATS_SERVER_DEB_SNAPSHOT=http://snapshot.debian.org/file/b17ee438c3d363b8b4d3ffcfe0ea5d1299597b2a
nats_version() {
  "$1" --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9.]*\).*/\1/p'
}
nats_too_old() {
  local found
  found=$(nats_version "$1")
  [[ -z $found ]] || [[ $(printf '%s\n%s\n' "$NATS_SERVER_MIN" "$found" | sort -V | head -n1) != "$NATS_SERVER_MIN" ]]
}
nats_needed=false
if [[ -n "${NATS_SERVER_BIN:-}" ]]; then
  if nats_too_old "$NATS_SERVER_BIN"; then
    found=$(nats_version "$NATS_SERVER_BIN" || true)
    echo "setup: NATS_SERVER_BIN=$NATS_SERVER_BIN is ${found:-not a runnable nats-server}; Spate needs nats-server >= $NATS_SERVER_MIN" >&2
    exit 1
  fi
elif ! command -v nats-server >/dev/null 2>&1 || nats_too_old nats-server; then
  nats_needed=true
fi

missing=()
if [[ -z "${PG_BIN_DIR:-}" ]] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# Browser tests (test/kit/browser.ts) drive Debian's Chromium with playwright-core; nothing is
# downloaded by Playwright itself.
if [[ -z "${CHROMIUM_BIN:-}" ]] && [[ ! -x /usr/bin/chromium ]]; then
  missing+=(chromium)
fi
# The README's first event is a curl command, and a test runs it as written.
if ! command -v curl >/dev/null 2>&1; then
  missing+=(curl)
fi
# npm start runs nats-server and PostgreSQL under setpriv --pdeathsig (util-linux), so they end
# with a launcher that is killed.
if ! command -v setpriv >/dev/null 2>&1; then
  missing+=(util-linux)
fi
# The multi-host rig (npm run test:multihost) builds its hosts from network namespaces (ip, from
# iproute2) and cuts and degrades their links with iptables; both live in /usr/sbin.
if ! command -v ip >/dev/null 2>&1 && [[ ! -x /usr/sbin/ip ]] && [[ ! -x /sbin/ip ]]; then
  missing+=(iproute2)
fi
if ! command -v iptables >/dev/null 2>&1 && [[ ! -x /usr/sbin/iptables ]]; then
  missing+=(iptables)
fi
# The TLS test makes its certificates with openssl.
if ! command -v openssl >/dev/null 2>&1; then
  missing+=(openssl)
fi

# Two tests check deploy files with the real parsers: `haproxy -c` (deploy/compose/haproxy.cfg) and
# `promtool check config` (deploy/observability/prometheus.yml). Debian ships promtool only in the
# `prometheus` package (/usr/bin/promtool, beside the server); haproxy is in /usr/sbin, which a
# non-root PATH may lack.
tools=()
if ! command -v haproxy >/dev/null 2>&1 && [[ ! -x /usr/sbin/haproxy ]]; then
  tools+=(haproxy)
fi
if ! command -v promtool >/dev/null 2>&1; then
  tools+=(prometheus)
fi

# Installing haproxy or prometheus on Debian enables their services and starts them. Only the
# binaries are wanted here, so no daemon must run or come up at boot: during the install a
# policy-rc.d that answers 101 ("action forbidden") stops invoke-rc.d and deb-systemd-invoke from
# starting anything (a policy-rc.d already there is put back afterwards), and then the services the
# packages enabled are disabled (and stopped, should one have started anyway).
install_tools_without_services() {
  local policy=/usr/sbin/policy-rc.d saved=""
  if [[ -e $policy ]]; then
    saved=$(mktemp)
    cp -p "$policy" "$saved"
  fi
  # shellcheck disable=SC2064 # expand now: the paths are fixed
  trap "if [[ -n '$saved' ]]; then mv -f '$saved' '$policy'; else rm -f '$policy'; fi" EXIT
  printf '#!/bin/sh\n# npm run setup: start no service while it installs packages\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  apt-get install -y -qq --no-install-recommends "${tools[@]}" >/dev/null
  local pkg
  for pkg in "${tools[@]}"; do
    if [[ -d /run/systemd/system ]]; then
      systemctl disable --now --quiet "$pkg.service" || true
    else
      deb-systemd-helper disable "$pkg.service" >/dev/null 2>&1 || true
    fi
    update-rc.d "$pkg" disable >/dev/null 2>&1 || true
  done
  if [[ -n $saved ]]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
  trap - EXIT
}

# Only the binary of the package goes in, as /usr/local/bin/nats-server (ahead of /usr/sbin on
# PATH): the package itself does not install on bookworm (its postinst needs a newer
# systemd-sysusers, "Unknown modifier 'u!'"), and no service of it is wanted.
install_nats_server() {
  local dir arch
  arch=$(dpkg --print-architecture)
  if [[ $arch != amd64 ]]; then
    echo "setup: the pinned nats-server package is for amd64, this machine is $arch: install nats-server >= $NATS_SERVER_MIN and set NATS_SERVER_BIN" >&2
    exit 1
  fi
  dir=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the path is fixed
  trap "rm -rf '$dir'" EXIT
  curl -fsS --retry 3 --connect-timeout 20 --max-time 300 -o "$dir/nats-server.deb" "http://deb.debian.org/debian/$NATS_SERVER_DEB" ||
    curl -fsS --retry 3 --connect-timeout 20 --max-time 300 -o "$dir/nats-server.deb" "$NATS_SERVER_DEB_SNAPSHOT" || {
    echo "setup: could not fetch $NATS_SERVER_DEB from deb.debian.org nor snapshot.debian.org; install nats-server >= $NATS_SERVER_MIN and set NATS_SERVER_BIN" >&2
    exit 1
  }
  echo "$NATS_SERVER_DEB_SHA256  $dir/nats-server.deb" | sha256sum --check --quiet
  dpkg-deb --fsys-tarfile "$dir/nats-server.deb" | tar -x -C "$dir" ./usr/sbin/nats-server
  install -m 755 "$dir/usr/sbin/nats-server" /usr/local/bin/nats-server
  rm -rf "$dir"
  trap - EXIT
  hash -r # forget where nats-server was found before
  if ! command -v nats-server >/dev/null 2>&1; then
    echo "setup: installed /usr/local/bin/nats-server $NATS_SERVER_MIN, which is not on PATH: add /usr/local/bin, or set NATS_SERVER_BIN=/usr/local/bin/nats-server" >&2
    exit 1
  fi
  if nats_too_old nats-server; then
    echo "setup: installed /usr/local/bin/nats-server $NATS_SERVER_MIN, but $(command -v nats-server) comes first on PATH;" >&2
    echo "  remove it, or set NATS_SERVER_BIN=/usr/local/bin/nats-server" >&2
    exit 1
  fi
}

packages=("${missing[@]}" "${tools[@]}")
if (( ${#packages[@]} )) || [[ $nats_needed == true ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if (( ${#packages[@]} )); then
      echo "setup: installing ${packages[*]} with apt-get"
      apt-get update -qq
    fi
    if (( ${#missing[@]} )); then
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    if (( ${#tools[@]} )); then
      install_tools_without_services
    fi
    if [[ $nats_needed == true ]]; then
      echo "setup: installing nats-server $NATS_SERVER_MIN from Debian testing ($NATS_SERVER_DEB)"
      install_nats_server
    fi
  else
    names=("${packages[@]}")
    if [[ $nats_needed == true ]]; then names+=("nats-server >= $NATS_SERVER_MIN"); fi
    echo "setup: missing ${names[*]}. Install them with:" >&2
    if (( ${#packages[@]} )); then
      echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages[*]}" >&2
    fi
    if (( ${#tools[@]} )); then
      echo "  sudo systemctl disable --now ${tools[*]}   # only the binaries are needed, not the services" >&2
    fi
    if [[ $nats_needed == true ]]; then
      echo "  cd \"\$(mktemp -d)\" && curl -fO http://deb.debian.org/debian/$NATS_SERVER_DEB" >&2
      echo "  echo '$NATS_SERVER_DEB_SHA256  $(basename "$NATS_SERVER_DEB")' | sha256sum --check && dpkg-deb -x $(basename "$NATS_SERVER_DEB") ." >&2
      echo "  sudo install -m 755 usr/sbin/nats-server /usr/local/bin/nats-server" >&2
      echo "  (or set NATS_SERVER_BIN to a nats-server >= $NATS_SERVER_MIN)" >&2
    fi
    exit 1
  fi
fi

nats_bin=${NATS_SERVER_BIN:-nats-server}
echo "setup: $("$nats_bin" --version)"
echo "setup: PostgreSQL $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || echo "${PG_BIN_DIR}")"
echo "setup: $(PATH="$PATH:/usr/sbin" haproxy -v | head -n1)"
echo "setup: $(promtool --version 2>&1 | head -n1)"
# The Debian wrapper script prints a harmless shell warning on stderr.
echo "setup: $("${CHROMIUM_BIN:-/usr/bin/chromium}" --version 2>/dev/null)"

npm ci --no-audit --no-fund
npm run build
echo "setup: done"
