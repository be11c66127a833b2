#!/usr/bin/env bash
# Regenerate the Python stubs of connectors/urlfrontier/urlfrontier.proto with grpcio-tools
# (the version pinned in pyproject's dev extra), so the generated modules import each other
# as frontierflow.connectors.urlfrontier.*. tests/connectors/urlfrontier checks that the
# committed stubs are what this script writes.
#
#   infra/urlfrontier/gen.sh [OUT_DIR]     (default: connectors/urlfrontier)
#
# PYTHON: the python with grpcio-tools (default python3).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
OUT="${1:-$ROOT/connectors/urlfrontier}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PKG="frontierflow/connectors/urlfrontier"
mkdir -p "$WORK/src/$PKG" "$WORK/out"
cp "$ROOT/connectors/urlfrontier/urlfrontier.proto" "$WORK/src/$PKG/"
(cd "$WORK/src" && "$PYTHON" -m grpc_tools.protoc -I. --python_out="$WORK/out" \
  --pyi_out="$WORK/out" --grpc_python_out="$WORK/out" "$PKG/urlfrontier.proto")
mkdir -p "$OUT"
for f in urlfrontier_pb2.py urlfrontier_pb2.pyi urlfrontier_pb2_grpc.py; do
  cp "$WORK/out/$PKG/$f" "$OUT/$f"
done
