#!/usr/bin/env bash
# Start a single-node Apache Kafka broker (KRaft: broker and controller in one JVM).
#
#   infra/kafka/start.sh [DATA_DIR]
#
# DATA_DIR defaults to ${TMPDIR:-/tmp}/frontierflow-kafka. Needs Java 17+, Maven and
# python3 with kafka-python (the project's own dependency). On success prints exactly one
# line, the bootstrap servers `127.0.0.1:<port>`, on stdout (and into DATA_DIR/bootstrap);
# every other message goes to stderr. Idempotent: a second call with the same DATA_DIR
# restarts a stopped broker with the same ports and data, or just waits for a running one.
#
# Environment (all optional):
#   KAFKA_PORT, KAFKA_CONTROLLER_PORT  ports for a NEW data dir (default: free ports)
#   KAFKA_START_TIMEOUT                seconds to wait for the broker to answer (120)
#   KAFKA_HEAP                         JVM heap options ("-Xms256m -Xmx512m")
#   KAFKA_CLASSPATH_CACHE              where the resolved classpath is kept
#                                      (${XDG_CACHE_HOME:-~/.cache}/frontierflow/kafka)
#   PYTHON                             python with kafka-python (python3)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$HERE/pom.xml"
PYTHON="${PYTHON:-python3}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
HEAP="${KAFKA_HEAP:--Xms256m -Xmx512m}"

log() { echo "[kafka] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

DATA_DIR="${1:-${TMPDIR:-/tmp}/frontierflow-kafka}"
mkdir -p "$DATA_DIR"
DATA_DIR="$(cd "$DATA_DIR" && pwd)"
PROPS="$DATA_DIR/server.properties"
PID_FILE="$DATA_DIR/broker.pid"
BROKER_LOG="$DATA_DIR/broker.log"

# ---------------------------------------------------------------- prerequisites
command -v java >/dev/null || die "java not found (Kafka 4 needs Java 17+)"
command -v mvn >/dev/null || die "mvn not found (needed once to resolve the broker's jars)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
java_major="$(java -XshowSettings:properties -version 2>&1 |
  sed -n 's/^ *java\.specification\.version = //p' | cut -d. -f1)"
[[ "${java_major:-0}" -ge 17 ]] || die "Java 17+ needed, found Java ${java_major:-?}"

# ---------------------------------------------------------------- classpath
# The classpath (jars inside ~/.m2) is cached under a name keyed by the pom's content, so
# it is resolved once per machine and again only when the pom changes (a stricter test
# than "newer than the pom", which a fresh clone would fail every time) or a jar went
# missing from ~/.m2.
CP_CACHE="${KAFKA_CLASSPATH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/kafka}"
pom_hash="$(sha256sum "$POM" | cut -c1-16)"
CP_FILE="$CP_CACHE/classpath-$pom_hash.txt"

classpath_ok() {
  [[ -s "$CP_FILE" ]] || return 1
  local jar
  IFS=: read -r -a jars < "$CP_FILE"
  for jar in "${jars[@]}"; do [[ -f "$jar" ]] || return 1; done
}

if ! classpath_ok; then
  log "resolving the broker's jars with Maven (first run only)..."
  mkdir -p "$CP_CACHE"
  tmp_cp="$(mktemp "$CP_CACHE/.classpath.XXXXXX")"
  # Maven's own output is kept aside and shown only if it fails (stdout stays one line).
  mvn_log="$CP_CACHE/mvn.log"
  if ! mvn -B -q -Dstyle.color=never -f "$POM" dependency:build-classpath \
        -Dmdep.outputFile="$tmp_cp" -Dmdep.includeScope=runtime >"$mvn_log" 2>&1; then
    tail -n 40 "$mvn_log" >&2
    rm -f "$tmp_cp"
    die "Maven could not resolve $POM (full output: $mvn_log)"
  fi
  mv -f "$tmp_cp" "$CP_FILE"   # atomic: concurrent starts never see half a file
  classpath_ok || die "classpath resolved but jars are missing: $CP_FILE"
fi
CP="$(cat "$CP_FILE")"

# Is a class on the classpath? (Used to pick the StorageTool of this Kafka version.)
has_class() {
  "$PYTHON" - "$1" "$CP" <<'EOF'
import sys, zipfile
entry = sys.argv[1].replace(".", "/") + ".class"
for jar in sys.argv[2].split(":"):
    with zipfile.ZipFile(jar) as z:
        if entry in z.namelist():
            sys.exit(0)
sys.exit(1)
EOF
}

# ---------------------------------------------------------------- already running?
cmdline_of() {  # the command line of a process, empty if it is gone
  if [[ -r "/proc/$1/cmdline" ]]; then tr '\0' ' ' < "/proc/$1/cmdline"
  else ps -o args= -p "$1" 2>/dev/null || true; fi
}
broker_pid() {
  # The pid in broker.pid, if that process is alive and really is this data dir's broker.
  local pid
  [[ -f "$PID_FILE" ]] || return 1
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$(cmdline_of "$pid")" == *"$PROPS"* ]] || return 1
  echo "$pid"
}

# ---------------------------------------------------------------- config
free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
prop() { sed -n "s/^$1=//p" "$PROPS" | tail -n1; }

if [[ -f "$PROPS" ]]; then
  # Restart: same ports as before, so clients holding the bootstrap address reconnect.
  PORT="$(prop listeners | sed -n 's/.*PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p')"
  CPORT="$(prop controller.quorum.voters | sed 's/.*://')"
  [[ -n "$PORT" && -n "$CPORT" ]] || die "cannot read the ports back from $PROPS"
  if [[ -n "${KAFKA_PORT:-}" && "$KAFKA_PORT" != "$PORT" ]]; then
    log "note: KAFKA_PORT=$KAFKA_PORT ignored, $DATA_DIR already uses port $PORT"
  fi
else
  PORT="${KAFKA_PORT:-$(free_port)}"
  CPORT="${KAFKA_CONTROLLER_PORT:-$(free_port)}"
  while [[ "$CPORT" == "$PORT" ]]; do CPORT="$(free_port)"; done
  # Written to a temp file first: a half-written server.properties must never be reused.
  cat > "$PROPS.tmp" <<EOF
# Written by infra/kafka/start.sh: single-node KRaft broker for tests and local runs.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA_DIR/logs

# One broker: every topic, internal ones included, has one replica.
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1

# Topics are created on purpose (docs/ARCHITECTURE.md), never by a typo.
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0

# Small and light: a test machine, not a production one.
num.network.threads=2
num.io.threads=4
log.segment.bytes=16777216
log.retention.hours=168
log.cleaner.dedupe.buffer.size=16777216
EOF
  mv "$PROPS.tmp" "$PROPS"
fi

# log4j2 config: everything to the console, which the broker's stdout sends to broker.log.
LOG4J="$DATA_DIR/log4j2.properties"
cat > "$LOG4J" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
EOF

BOOTSTRAP="127.0.0.1:$PORT"

# ---------------------------------------------------------------- readiness probe
# One metadata request through kafka-python: the broker is up when it answers. Its last
# error is kept in DATA_DIR/probe.err, shown if the broker never answers.
PROBE_ERR="$DATA_DIR/probe.err"
probe() {
  "$PYTHON" - "$BOOTSTRAP" <<'EOF' >/dev/null 2>"$PROBE_ERR"
import sys
from kafka.admin import KafkaAdminClient
# Short timeouts, under whichever names this kafka-python version knows (2.x or 3.x).
wanted = {"request_timeout_ms": 5000, "bootstrap_timeout_ms": 3000,
          "api_version_auto_timeout_ms": 3000}
opts = {k: v for k, v in wanted.items() if k in KafkaAdminClient.DEFAULT_CONFIG}
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], client_id="frontierflow-start-probe",
                         **opts)
try:
    admin.list_topics()
finally:
    admin.close()
EOF
}

stop_and_fail() {
  log "$1; last lines of $BROKER_LOG:"
  tail -n 40 "$BROKER_LOG" >&2 || true
  log "last readiness probe error:"
  tail -n 3 "$PROBE_ERR" >&2 || true
  "$HERE/stop.sh" "$DATA_DIR" || true
  exit 1
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  until probe; do
    kill -0 "$pid" 2>/dev/null || stop_and_fail "broker exited during startup"
    (( SECONDS < deadline )) ||
      stop_and_fail "broker did not answer on $BOOTSTRAP within ${START_TIMEOUT}s"
    sleep 0.5
  done
  rm -f "$PROBE_ERR"
}

finish() {
  echo "$BOOTSTRAP" > "$DATA_DIR/bootstrap"
  echo "$BOOTSTRAP"
}

if pid="$(broker_pid)"; then
  log "broker already running (pid $pid), waiting until it answers on $BOOTSTRAP"
  wait_ready "$pid"
  finish
  exit 0
fi

# ---------------------------------------------------------------- format storage
# KRaft needs its metadata log formatted once, with a cluster id. Kafka 4.0/4.1 keep the
# tool in core (kafka.tools.StorageTool); later versions moved it to the tools module.
if [[ ! -f "$DATA_DIR/logs/meta.properties" ]]; then
  storage_tool=""
  for cls in kafka.tools.StorageTool org.apache.kafka.tools.StorageTool; do
    if has_class "$cls"; then storage_tool="$cls"; break; fi
  done
  [[ -n "$storage_tool" ]] || die "no StorageTool class on the classpath"
  # A Kafka cluster id: 16 random bytes, base64url without padding, not starting with '-'.
  cluster_id="$("$PYTHON" -c '
import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    if not s.startswith("-"):
        print(s)
        break')"
  log "formatting $DATA_DIR/logs (cluster id $cluster_id)"
  # The static controller.quorum.voters above is the whole quorum: no --standalone here.
  java -Xmx256m -Dlog4j2.configurationFile="$LOG4J" -cp "$CP" "$storage_tool" \
    format -t "$cluster_id" -c "$PROPS" >>"$BROKER_LOG" 2>&1 ||
    { tail -n 20 "$BROKER_LOG" >&2; die "storage format failed"; }
  echo "$cluster_id" > "$DATA_DIR/cluster.id"
fi

# ---------------------------------------------------------------- start
log "starting broker on $BOOTSTRAP (controller 127.0.0.1:$CPORT), log: $BROKER_LOG"
echo "===== $(date -u +%Y-%m-%dT%H:%M:%SZ) start.sh: starting broker" >> "$BROKER_LOG"
# The JVM options of Kafka's own kafka-run-class.sh, with a small heap.
# shellcheck disable=SC2086  # HEAP is a list of options
nohup java $HEAP -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
  -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
  -Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J" \
  -Dkafka.logs.dir="$DATA_DIR" \
  -cp "$CP" kafka.Kafka "$PROPS" >>"$BROKER_LOG" 2>&1 </dev/null &
pid=$!
echo "$pid" > "$PID_FILE"

wait_ready "$pid"
log "broker ready (pid $pid) after ${SECONDS}s"
finish
