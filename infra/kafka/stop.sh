#!/usr/bin/env bash
# Stop the broker that infra/kafka/start.sh started.
#
#   infra/kafka/stop.sh [--purge] [DATA_DIR]
#
# SIGTERM (Kafka shuts down cleanly), then polls for up to KAFKA_STOP_TIMEOUT seconds
# (60) and sends SIGKILL if it is still alive. The data stays, so start.sh with the same
# DATA_DIR brings back the same broker, ports and messages; --purge deletes DATA_DIR.
set -euo pipefail

log() { echo "[kafka] $*" >&2; }

PURGE=0
DATA_DIR=""
for arg in "$@"; do
  case "$arg" in
    --purge) PURGE=1 ;;
    -*) log "unknown option $arg"; exit 2 ;;
    *) DATA_DIR="$arg" ;;
  esac
done
DATA_DIR="${DATA_DIR:-${TMPDIR:-/tmp}/frontierflow-kafka}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"

if [[ ! -d "$DATA_DIR" ]]; then
  log "no data dir $DATA_DIR: nothing to stop"
  exit 0
fi
DATA_DIR="$(cd "$DATA_DIR" && pwd)"
PROPS="$DATA_DIR/server.properties"
PID_FILE="$DATA_DIR/broker.pid"

cmdline_of() {  # the command line of a process, empty if it is gone
  if [[ -r "/proc/$1/cmdline" ]]; then tr '\0' ' ' < "/proc/$1/cmdline"
  else ps -o args= -p "$1" 2>/dev/null || true; fi
}
# True while $pid is alive and still this data dir's broker (a pid can be reused).
is_broker() { [[ "$(cmdline_of "$1")" == *"$PROPS"* ]]; }

pid=""
[[ -f "$PID_FILE" ]] && pid="$(cat "$PID_FILE")"
if [[ "$pid" =~ ^[0-9]+$ ]] && is_broker "$pid"; then
  log "stopping broker (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while is_broker "$pid" && (( SECONDS < deadline )); do sleep 0.2; done
  if is_broker "$pid"; then
    log "still alive after ${STOP_TIMEOUT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while is_broker "$pid"; do sleep 0.1; done
  fi
  log "broker stopped after ${SECONDS}s"
else
  log "no broker running for $DATA_DIR"
fi
rm -f "$PID_FILE"

if (( PURGE )); then
  log "purging $DATA_DIR"
  rm -rf "$DATA_DIR"
fi
