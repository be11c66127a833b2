#!/usr/bin/env bash
# Download and unpack Debian's HTML documentation packages: a real interlinked web with topics
# for focused-crawling simulations (LAFC, Akbari Torkestani 2012). See README.md beside this script.
#
#   infra/debian-docs/fetch.sh [PACKAGE ...]
#
# Default packages: linux-doc-6.1 python3.11-doc postgresql-doc-15 openjdk-17-doc.
# Each package is fetched with `apt-get download` (the .deb only, no installation, no
# dependencies) and unpacked with `dpkg -x` into <cache>/<package>/, where <cache> is
# ${XDG_CACHE_HOME:-~/.cache}/frontierflow/debian-docs. A package whose folder is complete
# (it holds a .complete marker) is skipped, so a warm run takes well under a second.
# On success prints exactly one line on stdout, the cache root; every other message goes to
# stderr.
#
# Needs: a Debian or Ubuntu system with apt-get and dpkg-deb, and package lists that know the
# packages (bookworm has all four). `apt-get download` itself runs as any user; only when it
# cannot find a package does this script run `apt-get update` once, which needs root (or
# sudo, which it then uses when available). Nothing is installed into the system.
#
# Environment (all optional):
#   DEBIAN_DOCS_CACHE   cache root (default ${XDG_CACHE_HOME:-~/.cache}/frontierflow/debian-docs)
set -euo pipefail

DEFAULT_PACKAGES=(linux-doc-6.1 python3.11-doc postgresql-doc-15 openjdk-17-doc)
CACHE_ROOT="${DEBIAN_DOCS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/debian-docs}"

log() { echo "[debian-docs] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 0
fi

packages=("$@")
[[ ${#packages[@]} -gt 0 ]] || packages=("${DEFAULT_PACKAGES[@]}")
for pkg in "${packages[@]}"; do
  # Debian package names: lowercase letters, digits and + - . ; refuse anything else early.
  [[ "$pkg" =~ ^[a-z0-9][a-z0-9+.-]+$ ]] || die "not a Debian package name: '$pkg'"
done

mkdir -p "$CACHE_ROOT"
updated=0

# Runs `apt-get update` once (as root, or through sudo), for when the lists lack a package.
update_lists() {
  [[ $updated -eq 0 ]] || return 1
  updated=1
  log "package lists do not know the package; running apt-get update once"
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update >&2
  elif command -v sudo >/dev/null; then
    sudo apt-get update >&2
  else
    die "apt-get update needs root (or sudo); run it once, then re-run this script"
  fi
}

# Downloads the .deb of package $1 into folder $2 (retrying once after apt-get update).
download_deb() {
  local pkg="$1" dir="$2"
  if (cd "$dir" && apt-get download "$pkg" >&2); then
    return 0
  fi
  update_lists || die "apt-get download $pkg failed even after apt-get update"
  (cd "$dir" && apt-get download "$pkg" >&2) || die "apt-get download $pkg failed"
}

command -v apt-get >/dev/null || die "apt-get not found (this script needs a Debian-like system)"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found"

for pkg in "${packages[@]}"; do
  dest="$CACHE_ROOT/$pkg"
  if [[ -f "$dest/.complete" ]]; then
    log "cached: $pkg ($(cat "$dest/.complete"))"
    continue
  fi
  start=$(date +%s)
  # Work in a scratch folder and move it into place at the end, so that a killed run never
  # leaves a half-unpacked tree that the check above would take as complete.
  tmp="$(mktemp -d "$CACHE_ROOT/.fetch.$pkg.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"   # lets apt's unprivileged _apt user write the .deb (sandboxed download)
  log "downloading $pkg"
  download_deb "$pkg" "$tmp"
  debs=("$tmp"/*.deb)
  [[ -f "${debs[0]}" ]] || die "apt-get download $pkg left no .deb behind"
  version="$(dpkg-deb --field "${debs[0]}" Version)"
  dpkg-deb -x "${debs[0]}" "$tmp/tree"   # what `dpkg -x` runs
  rm -f "${debs[@]}"
  echo "$pkg $version" >"$tmp/tree/.complete"
  rm -rf "$dest"
  mv "$tmp/tree" "$dest"
  rm -rf "$tmp"
  trap - EXIT
  log "unpacked $pkg $version in $(( $(date +%s) - start )) s: $(du -sh "$dest" | cut -f1)"
done

echo "$CACHE_ROOT"
