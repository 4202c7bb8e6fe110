#!/usr/bin/env bash
# Set up everything tests, the demo and benchmarks need on a fresh Debian machine:
# the .venv, a Bigtable emulator, dynalite (moto_server comes with the venv) and Chromium.
# Idempotent and quiet: each step is skipped when already done, and a step's output is
# shown only when it fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VPY=.venv/bin/python
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT

# Run a step with its output in $LOG; on failure print it (without pip's noise) and stop.
quiet() {
  local what="$1"
  shift
  if ! "$@" >"$LOG" 2>&1; then
    echo "setup: $what failed:" >&2
    grep -v 'WARNING: Location .* is ignored' "$LOG" >&2 || true
    exit 1
  fi
}

# sha256 of the given files, the content of a stamp that marks a step as done for them.
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }
stamp_fresh() { local stamp="$1"; shift; [ "$(cat "$stamp" 2>/dev/null)" = "$(digest "$@")" ]; }

apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  dpkg -s "$@" >/dev/null 2>&1 && return
  # Package lists may be missing or stale on a fresh machine: update once and retry.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$LOG" 2>&1 ||
    { quiet "apt-get update" $sudo apt-get update -q &&
      quiet "apt-get install $*" $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"; }
}

# 1. Python venv with the project (editable) and its test and bench extras.
[ -x "$VPY" ] || quiet "creating .venv" python3 -m venv .venv
# Re-installed when pyproject.toml or a compiled module's C source or header changes (each is an ext-module there,
# a header in its depends).
shopt -s nullglob
BUILD_INPUTS=(pyproject.toml mappers/*.c mappers/*/*.c pipelines/*/*.c mappers/*.h mappers/*/*.h pipelines/*/*.h)
shopt -u nullglob
if ! stamp_fresh .venv/.ddb2bt-stamp "${BUILD_INPUTS[@]}"; then
  quiet "pip install" "$VPY" -m pip install --disable-pip-version-check -e ".[test,bench,lint]"
  digest "${BUILD_INPUTS[@]}" >.venv/.ddb2bt-stamp
fi
"$VPY" pipelines/local/servers.py which moto >/dev/null

# 2. Bigtable emulator: Google's cbtemulator when installed; else the same in-memory server
#    (bttest) built from Debian's Go packages, since gcloud components can't be fetched here.
if ! "$VPY" pipelines/local/servers.py which cbtemulator >/dev/null 2>&1; then
  BTTEST=tools/emulator/bttest-emulator
  if [ ! -x "$BTTEST" ] || [ tools/emulator/main.go -nt "$BTTEST" ]; then
    apt_install golang-go golang-google-cloud-dev
    quiet "building $BTTEST" env GO111MODULE=off GOPATH=/usr/share/gocode \
      GOCACHE="${GOCACHE:-$ROOT/.cache/go-build}" go build -o "$BTTEST" tools/emulator/main.go
  fi
fi
"$VPY" pipelines/local/servers.py which bigtable >/dev/null

# 3. dynalite (in-memory DynamoDB) from the committed npm lock file.
command -v npm >/dev/null || { echo "setup: node and npm (Node.js >= 20) are needed for dynalite" >&2; exit 1; }
NODE_STAMP=tools/node/node_modules/.ddb2bt-stamp
if ! stamp_fresh "$NODE_STAMP" tools/node/package.json tools/node/package-lock.json; then
  quiet "npm ci (tools/node)" npm ci --prefix tools/node --no-audit --no-fund
  digest tools/node/package.json tools/node/package-lock.json >"$NODE_STAMP"
fi
"$VPY" pipelines/local/servers.py which dynalite >/dev/null

# 4. Headless Chromium (Debian's package), used by the test that renders the HTML report.
command -v chromium >/dev/null || apt_install chromium
