#!/usr/bin/env bash
# Drive a URL Frontier server on 127.0.0.1:PORT with the URL Frontier project's own Java
# stubs (com.github.crawler-commons:urlfrontier-API:VERSION) and check every rpc.
#
#   infra/urlfrontier/harness/run.sh VERSION PORT      (VERSION: 2.4 or 2.3.1)
#
# The classpath is resolved through Maven once (cached in ~/.m2) and the compiled harness is
# kept under ${XDG_CACHE_HOME:-~/.cache}/frontierflow/urlfrontier-harness, keyed by the
# version and a hash of the sources, so later runs start the JVM straight away.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${1:?version}"
PORT="${2:?port}"
command -v java >/dev/null || { echo "java not found" >&2; exit 2; }
command -v javac >/dev/null || { echo "javac not found" >&2; exit 2; }
SOURCES=("$HERE/src/frontierflow/harness/Harness.java")
if [[ "$VERSION" != 2.3* ]]; then
  SOURCES+=("$HERE/src/frontierflow/harness/Harness24.java")
fi
hash="$(cat "$HERE/pom.xml" "${SOURCES[@]}" | sha256sum | cut -c1-16)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/urlfrontier-harness/$VERSION-$hash"
if [[ ! -f "$CACHE/ready" ]]; then
  command -v mvn >/dev/null || { echo "mvn not found" >&2; exit 2; }
  rm -rf "$CACHE" && mkdir -p "$CACHE/classes"
  mvn -q -B -f "$HERE/pom.xml" dependency:build-classpath -Durlfrontier.version="$VERSION" \
    -Dmdep.outputFile="$CACHE/classpath.txt" >&2
  javac -nowarn -d "$CACHE/classes" -cp "$(cat "$CACHE/classpath.txt")" "${SOURCES[@]}" >&2
  touch "$CACHE/ready"
fi
exec java -cp "$CACHE/classes:$(cat "$CACHE/classpath.txt")" frontierflow.harness.Harness "$PORT"
