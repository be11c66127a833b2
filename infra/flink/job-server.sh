#!/usr/bin/env bash
# Beam's Flink job server and the KafkaIO expansion service kept running between jobs, so a
# job submitted to the session cluster does not start two JVMs of its own first.
#
#   infra/flink/job-server.sh start    start both (or find them running); prints one line
#                                      on stdout: JOB_ENDPOINT EXPANSION_ADDRESS
#                                      (127.0.0.1:PORT 127.0.0.1:PORT)
#   infra/flink/job-server.sh stop     stop both
#   infra/flink/job-server.sh address  print the line `start` prints
#
# Give them to a job with `--beam-option=--job_endpoint=JOB_ENDPOINT` (instead of
# `--flink_job_server_jar`) and `--kafka-io EXPANSION_ADDRESS` (instead of the expansion
# jar), or to `frontierflow bench kafka --beam-stream … --job-endpoint … --kafka-io …`.
# Both bind every interface, as the ones Beam starts for a job do (the job server's
# --job-host only names the host it advertises): keep their ports behind a firewall on a
# machine others can reach. The job server submits to the session cluster of `cluster.sh`
# (its REST address from `cluster.sh address`, or FLINK_MASTER), with the class path that
# lets a job upload no jars (README.md, "Jobs that upload nothing"); the expansion service
# expands the read as `pipelines/beam/kafka_io.py` does (the deprecated read, Java steps
# embedded).
#
# Environment (all optional):
#   FLINK_JOB_SERVER_DIR      its folder: pids, logs, the address (${TMPDIR:-/tmp}/
#                             frontierflow-flink-job-server)
#   FLINK_MASTER              the cluster's REST address (default: cluster.sh address)
#   FLINK_JOB_SERVER_TIMEOUT  seconds to wait for each to listen (120)
#   PYTHON                    python3, for free ports and the wait
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
DIR="${FLINK_JOB_SERVER_DIR:-${TMPDIR:-/tmp}/frontierflow-flink-job-server}"
TIMEOUT="${FLINK_JOB_SERVER_TIMEOUT:-120}"
mkdir -p "$DIR"
ADDRESS="$DIR/address"

log() { echo "[flink-job-server] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# alive NAME: the pid in NAME.pid if that process is alive and is this folder's NAME.
alive() {
  local pid
  [[ -f "$DIR/$1.pid" ]] || return 1
  pid="$(cat "$DIR/$1.pid")"
  [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "-Dfrontierflow.process=$DIR/$1" || return 1
  echo "$pid"
}

# listening PORT: wait until something accepts on 127.0.0.1:PORT, or TIMEOUT passes.
listening() {
  "$PYTHON" - "$1" "$TIMEOUT" <<'EOF'
import socket, sys, time
port, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(1)
EOF
}

launch() {  # NAME JAR ARGS…: start `java -jar JAR ARGS…` in the background, pid in NAME.pid
  local name="$1" jar="$2"; shift 2
  nohup java "-Dfrontierflow.process=$DIR/$name" -jar "$jar" "$@" \
    >"$DIR/$name.log" 2>&1 </dev/null &
  echo $! > "$DIR/$name.pid"
}

stop_one() {
  local pid
  if pid="$(alive "$1")"; then
    log "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do [[ -r "/proc/$pid/cmdline" ]] || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/$1.pid"
}

start() {
  if alive job-server >/dev/null && alive expansion >/dev/null && [[ -f "$ADDRESS" ]]; then
    cat "$ADDRESS"; return
  fi
  stop_one job-server; stop_one expansion
  local master jar expansion_jar job_port expansion_port
  master="${FLINK_MASTER:-$(bash "$HERE/cluster.sh" address)}"
  jar="$(bash "$HERE/fetch-job-server.sh")"
  expansion_jar="$(bash "$HERE/fetch-job-server.sh" --kafka-expansion-service)"
  job_port="$(free_port)"; expansion_port="$(free_port)"
  mkdir -p "$DIR/artifacts"
  launch job-server "$jar" --flink-master "$master" --job-host 127.0.0.1 \
    --job-port "$job_port" --artifact-port 0 --expansion-port 0 \
    --artifacts-dir "$DIR/artifacts"
  # the arguments `pipelines/beam/kafka_io.py` gives the expansion service it starts itself
  launch expansion "$expansion_jar" "$expansion_port" '--javaClassLookupAllowlistFile=*' \
    --defaultEnvironmentType=EMBEDDED --experiments=use_deprecated_read
  listening "$job_port" || die "the job server did not listen within ${TIMEOUT}s: $DIR/job-server.log"
  listening "$expansion_port" || die "the expansion service did not listen within ${TIMEOUT}s: $DIR/expansion.log"
  echo "127.0.0.1:$job_port 127.0.0.1:$expansion_port" > "$ADDRESS"
  log "job server on 127.0.0.1:$job_port (cluster $master), expansion service on 127.0.0.1:$expansion_port"
  cat "$ADDRESS"
}

case "${1:-}" in
  start) start ;;
  stop) stop_one job-server; stop_one expansion; rm -f "$ADDRESS" ;;
  address) [[ -f "$ADDRESS" ]] || die "not running (start it: $0 start)"; cat "$ADDRESS" ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; [[ "${1:-}" == help ]] || exit 2 ;;
esac
