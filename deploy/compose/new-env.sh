#!/bin/sh
# Writes deploy/compose/.env with fresh random secrets for compose.yaml, unless it exists:
# the NATS users' and route passwords (32 letters and digits, starting with a letter, as
# deploy/nats/auth.conf needs them) and SPATE_SECRET_KEY (32 random bytes, base64).
# Run it once: `sh deploy/compose/new-env.sh`.
set -eu
env_file="$(dirname "$0")/.env"
if [ -e "$env_file" ]; then
  echo "$env_file exists; not overwriting it" >&2
  exit 1
fi
password() {
  first=$(LC_ALL=C tr -dc 'A-Za-z' </dev/urandom | head -c 1)
  rest=$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 31)
  printf '%s%s' "$first" "$rest"
}
umask 077
{
  for user in INGEST WORKER ADMIN OPERATOR ROUTE; do
    printf 'SPATE_NATS_%s_PASSWORD=%s\n' "$user" "$(password)"
  done
  printf 'SPATE_SECRET_KEY=%s\n' "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
} >"$env_file"
echo "wrote $env_file (mode 600)"
