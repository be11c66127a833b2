#!/usr/bin/env bash
# Build Apache Beam's Prism runner (a single Go binary) at the Beam version the project pins.
#
#   infra/prism/build.sh
#
# Runs `go install github.com/apache/beam/sdks/v2/go/cmd/prism@v<version>` through the Go
# module proxy, with GOBIN set to the cache dir ${XDG_CACHE_HOME:-~/.cache}/frontierflow/prism/<version>/.
# Skips the build when that binary already exists. On success prints exactly one line on
# stdout, the binary's path; every other message goes to stderr. Give the path to Beam
# with `--prism_location=<path>` so that Beam never tries to download Prism.
#
# Environment (all optional):
#   BEAM_VERSION    the Beam version to build (default: the apache-beam pin in pyproject.toml,
#                   else the installed apache_beam's version)
#   PRISM_CACHE     cache root (default ${XDG_CACHE_HOME:-~/.cache}/frontierflow/prism)
#   PYTHON          python used for the fallback version look-up (python3)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
MODULE="github.com/apache/beam/sdks/v2"
PKG="$MODULE/go/cmd/prism"

log() { echo "[prism] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- version
version="${BEAM_VERSION:-}"
if [[ -z "$version" && -f "$REPO/pyproject.toml" ]]; then
  version="$(sed -n 's/.*"apache-beam\(\[[^]]*\]\)\{0,1\}==\([0-9][0-9.]*\)".*/\2/p' \
    "$REPO/pyproject.toml" | head -n1)"
fi
if [[ -z "$version" ]]; then
  version="$("$PYTHON" -c 'import apache_beam; print(apache_beam.__version__)' 2>/dev/null)" ||
    die "no apache-beam==X.Y.Z pin in pyproject.toml and apache_beam is not importable"
fi
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "unexpected Beam version '$version'"

CACHE_ROOT="${PRISM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/prism}"
BIN_DIR="$CACHE_ROOT/$version"
BIN="$BIN_DIR/prism"

if [[ -x "$BIN" ]]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

# ---------------------------------------------------------------- build
command -v go >/dev/null || die "go not found (needed once to build Prism)"
mkdir -p "$BIN_DIR"

# One build at a time per version (two pytest sessions, or CI and a developer).
if command -v flock >/dev/null; then
  exec 9>"$BIN_DIR/.lock"
  flock 9
  if [[ -x "$BIN" ]]; then
    log "built meanwhile by another process: $BIN"
    echo "$BIN"
    exit 0
  fi
fi

# Install into a scratch dir, then move into place, so that a killed build never leaves a
# half-written binary behind that the check above would take as done.
tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

log "building $PKG@v$version with $(go version | cut -d' ' -f3) (first time only; takes minutes)"
start=$(date +%s)
# Run outside any Go module (the repo has none, but a parent dir might); -trimpath keeps
# this machine's paths out of the binary.
(cd "$tmp" && GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -trimpath" go install "$PKG@v$version") >&2 ||
  die "go install $PKG@v$version failed"
[[ -x "$tmp/prism" ]] || die "go install finished but $tmp/prism is missing"
mv -f "$tmp/prism" "$BIN"
log "built in $(( $(date +%s) - start )) s: $BIN"
echo "$BIN"
