#!/usr/bin/env bash
# A standalone Flink session cluster on this machine: one JobManager and TaskManagers
# (two by default, two slots each), each its own JVM, from Flink's jars resolved through
# Maven by coordinates (infra/flink/pom.xml) at the Flink release of Beam's job server.
# The job server's own class path comes first on the cluster's: a job submitted with
# --pipeline_resources_detector_factory_class=frontierflow.flink.ClusterClassPath uploads
# no jars (README.md, "Jobs that upload nothing").
#
#   infra/flink/cluster.sh start                 start (or wait for) the cluster; prints
#                                                its REST address 127.0.0.1:PORT as the
#                                                only stdout line
#   infra/flink/cluster.sh stop [--purge]        stop every process it started (pid files);
#                                                --purge also deletes the cluster dir
#   infra/flink/cluster.sh status                the processes and the REST overview
#   infra/flink/cluster.sh address               print the REST address
#   infra/flink/cluster.sh kill-taskmanager N    SIGKILL TaskManager N (a crash)
#   infra/flink/cluster.sh start-taskmanager N   start a fresh TaskManager N, wait until it
#                                                has registered
#   infra/flink/cluster.sh jobs                  one line per job: id, state, name
#   infra/flink/cluster.sh savepoint JOB_ID      trigger a savepoint, print its path
#   infra/flink/cluster.sh stop-job JOB_ID       take a savepoint and cancel the job (not
#                                                Flink's stop: see savepoint_op), print
#                                                the savepoint's path
#   infra/flink/cluster.sh help                  this text
#
# Everything lives in one folder, FLINK_CLUSTER_DIR (${TMPDIR:-/tmp}/frontierflow-flink-
# cluster): conf/ (config.yaml and log4j.properties, written on each start), log/ (one .log
# and one .out per process), pids/, checkpoints/, savepoints/, tmp/ (RocksDB working dirs).
# REST and RPC listen on 127.0.0.1 only. Submit a Beam pipeline with
# `--runner=FlinkRunner --flink_master=127.0.0.1:PORT` (see README.md).
#
# Environment (all optional):
#   FLINK_CLUSTER_DIR             the cluster's folder (see above)
#   FLINK_CLUSTER_TASKMANAGERS    how many TaskManagers `start` starts (2)
#   FLINK_CLUSTER_SLOTS           task slots per TaskManager (2)
#   FLINK_CLUSTER_FLINK_VERSION   Flink release of the cluster (default: the one the job
#                                 server from fetch-job-server.sh was built against)
#   FLINK_CLUSTER_START_TIMEOUT   seconds to wait for the TaskManagers to register (90)
#   FLINK_CLUSTER_STOP_TIMEOUT    seconds to wait for a process to exit on SIGTERM (30)
#   FLINK_CLUSTER_SAVEPOINT_TIMEOUT  seconds to wait for a savepoint (120)
#   FLINK_CLUSTER_SAVEPOINT_ATTEMPTS savepoints triggered in all when a task declines one
#                                 (a task starting or closing) while the job runs (3)
#   FLINK_CLUSTER_TASK_HEAP_MB    each TaskManager's task heap, MiB (256: enough for the
#                                 tests; a TaskManager of a 333,000-event backlog run ran
#                                 out of heap at 256 while it took in a Python stage's
#                                 output, docs/RESULTS.md)
#   FLINK_CLUSTER_STATE_BACKEND   where keyed state lives: rocksdb (the default: on disk, any
#                                 size) or hashmap (on the task heap; the state must fit
#                                 FLINK_CLUSTER_TASK_HEAP_MB; docs/results/beam.md)
#   FLINK_CLUSTER_MANAGED_MB      each TaskManager's managed memory, MiB (512): RocksDB's
#                                 memtables and block cache, shared by the slots. At 128 the
#                                 unbounded form's latency at a million URLs was 5x higher
#                                 (docs/results/beam.md, "RocksDB's memory")
#   FLINK_CLUSTER_EXTRA_CONF      a file of Flink options (config.yaml lines) appended to the
#                                 configuration this script writes; for options it does not
#                                 set itself (one it sets is refused)
#   FLINK_CLUSTER_CLASSPATH_CACHE where the resolved class path is kept
#                                 (${XDG_CACHE_HOME:-~/.cache}/frontierflow/flink)
#   PYTHON                        python3, for free ports and the REST calls
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$HERE/pom.xml"
PYTHON="${PYTHON:-python3}"
DIR="${FLINK_CLUSTER_DIR:-${TMPDIR:-/tmp}/frontierflow-flink-cluster}"
[[ "$DIR" == /* ]] || DIR="$PWD/$DIR"
N_TM="${FLINK_CLUSTER_TASKMANAGERS:-2}"
SLOTS="${FLINK_CLUSTER_SLOTS:-2}"
START_TIMEOUT="${FLINK_CLUSTER_START_TIMEOUT:-90}"
STOP_TIMEOUT="${FLINK_CLUSTER_STOP_TIMEOUT:-30}"
SAVEPOINT_TIMEOUT="${FLINK_CLUSTER_SAVEPOINT_TIMEOUT:-120}"
SAVEPOINT_ATTEMPTS="${FLINK_CLUSTER_SAVEPOINT_ATTEMPTS:-3}"
STATE_BACKEND="${FLINK_CLUSTER_STATE_BACKEND:-rocksdb}"
case "$STATE_BACKEND" in rocksdb|hashmap) ;; *)
  echo "FLINK_CLUSTER_STATE_BACKEND must be rocksdb or hashmap, not '$STATE_BACKEND'" >&2; exit 2;;
esac
CP_CACHE="${FLINK_CLUSTER_CLASSPATH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/flink}"

# Memory, in MiB: what Flink's jobmanager.sh / taskmanager.sh compute from a process size
# (BashJavaUtils), written out here because the entrypoints are started directly. Small: the
# whole cluster (JobManager + 2 TaskManagers) stays within ~5 GB of JVM limits.
JM_HEAP=384; JM_OFF_HEAP=64; JM_METASPACE=192; JM_OVERHEAD=128
TM_FRAMEWORK_HEAP=64; TM_TASK_HEAP="${FLINK_CLUSTER_TASK_HEAP_MB:-256}"  # JVM heap = both
TM_FRAMEWORK_OFF_HEAP=128; TM_TASK_OFF_HEAP=128   # direct memory: Netty, Beam's gRPC
TM_NETWORK=128                                    # shuffle buffers (min = max)
TM_MANAGED="${FLINK_CLUSTER_MANAGED_MB:-512}"     # RocksDB, shared by the slots
for mb in "$TM_TASK_HEAP" "$TM_MANAGED"; do
  [[ "$mb" =~ ^[1-9][0-9]*$ ]] || {
    echo "FLINK_CLUSTER_TASK_HEAP_MB and FLINK_CLUSTER_MANAGED_MB take MiB, not '$mb'" >&2; exit 2; }
done
# Metaspace: each job loads the runner and, for the streaming form, KafkaIO and an embedded
# Java SDK harness into its own class loader (a TaskManager ran out at 256 MiB after a few
# such jobs).
TM_METASPACE=768; TM_OVERHEAD=128

# What Flink's own launcher opens and exports for Java 17 (env.java.opts.all of a 1.19
# distribution), the same list as fetch-job-server.sh's manifest.
JAVA_MODULE_OPTS=(
  --add-exports=java.base/sun.net.util=ALL-UNNAMED
  --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED
)
for pkg in java.lang java.lang.reflect java.io java.net java.nio sun.nio.ch java.text \
  java.time java.util java.util.concurrent java.util.concurrent.atomic java.util.concurrent.locks; do
  JAVA_MODULE_OPTS+=("--add-opens=java.base/$pkg=ALL-UNNAMED")
done

JM_CLASS="org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TM_CLASS="org.apache.flink.runtime.taskexecutor.TaskManagerRunner"

log() { echo "[flink-cluster] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

CONF="$DIR/conf"
LOGS="$DIR/log"
PIDS="$DIR/pids"

# ---------------------------------------------------------------- processes
cmdline_of() {  # the command line of a process, empty if it is gone
  if [[ -r "/proc/$1/cmdline" ]]; then tr '\0' ' ' < "/proc/$1/cmdline"
  else ps -o args= -p "$1" 2>/dev/null || true; fi
}
# live_pid NAME: the pid in pids/NAME.pid if that process is alive and really is this
# cluster's NAME (its command line names this conf dir and its own marker).
live_pid() {
  local pid cmd
  [[ -f "$PIDS/$1.pid" ]] || return 1
  pid="$(cat "$PIDS/$1.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmd="$(cmdline_of "$pid")"
  [[ "$cmd" == *"--configDir $CONF "* && "$cmd" == *"-Dfrontierflow.process=$1 "* ]] || return 1
  echo "$pid"
}
is_alive() { [[ -n "$(cmdline_of "$1")" ]]; }

# stop_process NAME: SIGTERM, wait up to STOP_TIMEOUT, then SIGKILL.
stop_process() {
  local pid deadline
  if ! pid="$(live_pid "$1")"; then rm -f "$PIDS/$1.pid"; return 0; fi
  log "stopping $1 (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while is_alive "$pid" && (( SECONDS < deadline )); do sleep 0.2; done
  if is_alive "$pid"; then
    log "$1 still alive after ${STOP_TIMEOUT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while is_alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$PIDS/$1.pid"
}

# ---------------------------------------------------------------- REST
rest_address() {
  [[ -f "$DIR/rest-address" ]] || die "no cluster in $DIR (run: $0 start)"
  cat "$DIR/rest-address"
}

# rest METHOD PATH [JSON_BODY]: the response body on stdout; non-zero if the REST endpoint
# does not answer or answers with an error status (its body then goes to stderr).
rest() {
  "$PYTHON" - "$(rest_address)" "$@" <<'EOF'
import sys, urllib.error, urllib.request
addr, method, path = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request(f"http://{addr}{path}", data=body, method=method,
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=10) as resp:
        sys.stdout.write(resp.read().decode())
except urllib.error.HTTPError as e:
    sys.stderr.write(f"{method} {path}: HTTP {e.code} {e.read().decode()}\n")
    sys.exit(2)
except OSError as e:
    sys.stderr.write(f"{method} {path}: {e}\n")
    sys.exit(1)
EOF
}

# registered [RESOURCE_ID]: "<number of TaskManagers> <total slots>", or whether the
# TaskManager RESOURCE_ID has registered (exit status), from GET /taskmanagers.
registered() {
  local body
  body="$(rest GET /taskmanagers 2>/dev/null)" || return 1
  "$PYTHON" -c '
import json, sys
tms = json.loads(sys.argv[1])["taskmanagers"]
if len(sys.argv) > 2:
    sys.exit(0 if any(tm["id"] == sys.argv[2] for tm in tms) else 1)
print(len(tms), sum(tm["slotsNumber"] for tm in tms))' "$body" "$@"
}

# ---------------------------------------------------------------- class path
# The cluster runs the Flink release the job server was built against: the runner classes
# the job server uploads with each job are compiled against it.
flink_version() {
  if [[ -n "${FLINK_CLUSTER_FLINK_VERSION:-}" ]]; then echo "$FLINK_CLUSTER_FLINK_VERSION"; return; fi
  local jar lib runtime
  jar="$("$HERE/fetch-job-server.sh")" || die "no Flink job server (infra/flink/fetch-job-server.sh)"
  lib="${jar%.jar}.lib"
  if [[ -d "$lib" ]]; then  # an assembled job server: flink-runtime-<v>.jar beside it
    runtime="$(find "$lib" -maxdepth 1 -name 'flink-runtime-[0-9]*.jar' | head -n1)"
    [[ -n "$runtime" ]] || die "no flink-runtime jar in $lib"
    basename "$runtime" .jar | sed 's/^flink-runtime-//'
  else  # the published shaded jar keeps Flink's Maven metadata
    "$PYTHON" - "$jar" <<'EOF' || die "cannot tell the Flink release of $jar: set FLINK_CLUSTER_FLINK_VERSION"
import sys, zipfile
props = zipfile.ZipFile(sys.argv[1]).read(
    "META-INF/maven/org.apache.flink/flink-runtime/pom.properties").decode()
print(next(l.split("=", 1)[1].strip() for l in props.splitlines() if l.startswith("version=")))
EOF
  fi
}

# The class path (jars inside ~/.m2) is cached under a name keyed by the pom's content and
# the Flink release, and resolved again only when either changes or a jar went missing.
classpath() {
  local version="$1" cp_file
  cp_file="$CP_CACHE/cluster-classpath-$version-$(sha256sum "$POM" | cut -c1-16).txt"
  if ! classpath_ok "$cp_file"; then
    command -v mvn >/dev/null || die "mvn not found (needed once to resolve Flink's jars)"
    log "resolving Flink $version's jars with Maven (first run only)..."
    mkdir -p "$CP_CACHE"
    local tmp_cp mvn_log="$CP_CACHE/cluster-mvn.log"
    tmp_cp="$(mktemp "$CP_CACHE/.cluster-classpath.XXXXXX")"
    if ! mvn -B -q -ntp -Dstyle.color=never -f "$POM" dependency:build-classpath \
        -Dflink.version="$version" -Dmdep.outputFile="$tmp_cp" -Dmdep.includeScope=runtime \
        >"$mvn_log" 2>&1; then
      tail -n 40 "$mvn_log" >&2
      rm -f "$tmp_cp"
      die "Maven could not resolve $POM at Flink $version (full output: $mvn_log)"
    fi
    mv -f "$tmp_cp" "$cp_file"  # atomic: concurrent starts never see half a file
    classpath_ok "$cp_file" || die "class path resolved but jars are missing: $cp_file"
  fi
  cat "$cp_file"
}
# The job server's own class path (Beam's Flink runner, its SDK, KafkaIO) ahead of Flink's:
# a job submitted with --pipeline_resources_detector_factory_class=
# frontierflow.flink.ClusterClassPath then uploads no jars, its classes are already here
# (README.md, "Jobs that upload nothing"). Its SLF4J binding stays out: the cluster logs
# through Log4j 2. A published (shaded) job server is not added: jobs upload it.
job_server_classpath() {
  local jar lib
  jar="$("$HERE/fetch-job-server.sh")" || die "no Flink job server (infra/flink/fetch-job-server.sh)"
  lib="${jar%.jar}.lib"
  [[ -d "$lib" ]] || return 0
  find "$lib" -maxdepth 1 -name '*.jar' ! -name 'slf4j-simple-*' | sort | paste -sd: -
}
# Flink's class path, after the job server's when there is one.
cluster_classpath() {
  local version="$1" own
  own="$(job_server_classpath)"
  echo "${own:+$own:}$(classpath "$version")"
}
classpath_ok() {
  [[ -s "$1" ]] || return 1
  local jar jars
  IFS=: read -r -a jars < "$1"
  for jar in "${jars[@]}"; do [[ -f "$jar" ]] || return 1; done
}

# ---------------------------------------------------------------- configuration
free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
conf_value() {
  [[ -f "$CONF/config.yaml" ]] || return 0
  sed -n "s/^$1: *//p" "$CONF/config.yaml" | tail -n1
}

write_config() {
  local rest_port rpc_port
  # A restarted cluster keeps its ports, so clients holding the address find it again.
  rest_port="$(conf_value rest.port)"; rpc_port="$(conf_value jobmanager.rpc.port)"
  [[ -n "$rest_port" ]] || rest_port="$(free_port)"
  [[ -n "$rpc_port" && "$rpc_port" != "$rest_port" ]] || rpc_port="$(free_port)"
  while [[ "$rpc_port" == "$rest_port" ]]; do rpc_port="$(free_port)"; done
  mkdir -p "$CONF" "$LOGS" "$PIDS" "$DIR/checkpoints" "$DIR/savepoints" "$DIR/tmp" "$DIR/plugins"
  cat > "$CONF/config.yaml.tmp" <<EOF
# Written by infra/flink/cluster.sh on each start; edit the script, not this file.

# -- where everything listens: loopback only
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc_port
jobmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest_port

# -- memory: what jobmanager.sh / taskmanager.sh would compute (see the script's sizes)
jobmanager.memory.heap.size: ${JM_HEAP}m
jobmanager.memory.off-heap.size: ${JM_OFF_HEAP}m
jobmanager.memory.jvm-metaspace.size: ${JM_METASPACE}m
jobmanager.memory.jvm-overhead.min: ${JM_OVERHEAD}m
jobmanager.memory.jvm-overhead.max: ${JM_OVERHEAD}m
taskmanager.numberOfTaskSlots: $SLOTS
taskmanager.cpu.cores: $SLOTS
taskmanager.memory.framework.heap.size: ${TM_FRAMEWORK_HEAP}m
taskmanager.memory.task.heap.size: ${TM_TASK_HEAP}m
taskmanager.memory.framework.off-heap.size: ${TM_FRAMEWORK_OFF_HEAP}m
taskmanager.memory.task.off-heap.size: ${TM_TASK_OFF_HEAP}m
taskmanager.memory.network.min: ${TM_NETWORK}m
taskmanager.memory.network.max: ${TM_NETWORK}m
taskmanager.memory.managed.size: ${TM_MANAGED}m
taskmanager.memory.jvm-metaspace.size: ${TM_METASPACE}m
taskmanager.memory.jvm-overhead.min: ${TM_OVERHEAD}m
taskmanager.memory.jvm-overhead.max: ${TM_OVERHEAD}m

# -- batch jobs: Flink's sort-based blocking shuffle wants 512 network buffers for each
# result partition by default; a Beam batch job holds many partitions in one slot
taskmanager.network.sort-shuffle.min-buffers: 64

# -- scheduling: a job of parallelism 2 gets one slot on each TaskManager, so killing one
# TaskManager hits the job; a lost TaskManager is noticed within seconds
cluster.evenly-spread-out-slots: true
heartbeat.interval: 2000
heartbeat.timeout: 10000
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 20
restart-strategy.fixed-delay.delay: 2 s

# -- state: keyed state in RocksDB (or the heap), checkpoints and savepoints in this
# cluster's folder
state.backend.type: $STATE_BACKEND
state.backend.incremental: true
# RocksDB's memtables: each stateful step of a Beam job has a RocksDB instance of a few
# column families (its cell, its waiting items, its records, the runner's timers), some
# twenty per slot. With RocksDB's 64 MB write buffers (8 MB arena blocks) they outgrew the
# slot's write buffer budget (half its managed memory), so writes flushed the oldest, tiny
# memtable one after another and stopped while flushes queued (docs/results/beam.md, "The
# write buffers"); 8 MB buffers (1 MB blocks) stay inside it
state.backend.rocksdb.writebuffer.size: 8mb
# managed memory to the state backend alone: Beam's Python workers are not Flink's own
# (Flink's default weights keep 30% of it for PyFlink's workers)
taskmanager.memory.managed.consumer-weights: OPERATOR:70,STATE_BACKEND:70
state.checkpoints.dir: file://$DIR/checkpoints
state.savepoints.dir: file://$DIR/savepoints
execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION
io.tmp.dirs: $DIR/tmp

# -- each job uploads Beam's runner jars (~190 MB, see README.md): drop a finished job's
# copies on the TaskManagers after a minute rather than an hour
blob.service.cleanup.interval: 60

# -- the REST API's metrics (watermarks among them) fetched from the TaskManagers every
# half second, not every 10 s: a sampler of the API sees the watermarks move as they do
metrics.fetcher.update-interval: 500

# -- leaner than a default cluster
rest.flamegraph.enabled: ${FLINK_FLAMEGRAPH:-false}
metrics.internal.query-service.port: 0
EOF
  if [[ -n "${FLINK_CLUSTER_EXTRA_CONF:-}" ]]; then
    [[ -f "$FLINK_CLUSTER_EXTRA_CONF" ]] || die "FLINK_CLUSTER_EXTRA_CONF: no file $FLINK_CLUSTER_EXTRA_CONF"
    local key
    for key in $(sed -n 's/^\([A-Za-z0-9_.-]*\):.*/\1/p' "$FLINK_CLUSTER_EXTRA_CONF"); do
      ! grep -q "^$key:" "$CONF/config.yaml.tmp" \
        || die "FLINK_CLUSTER_EXTRA_CONF sets $key, which this script sets (see its environment)"
    done
    { echo; echo "# -- from $FLINK_CLUSTER_EXTRA_CONF"; cat "$FLINK_CLUSTER_EXTRA_CONF"; } >> "$CONF/config.yaml.tmp"
  fi
  mv "$CONF/config.yaml.tmp" "$CONF/config.yaml"
  # Log4j 2, as a distribution's conf/log4j.properties: one file per process (log.file).
  cat > "$CONF/log4j.properties" <<'EOF'
monitorInterval = 0
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = MainAppender
logger.pekko.name = org.apache.pekko
logger.pekko.level = INFO
logger.akka.name = akka
logger.akka.level = INFO
logger.netty.name = org.jboss.netty.channel.DefaultChannelPipeline
logger.netty.level = OFF
logger.beamgrpc.name = org.apache.beam.vendor.grpc
logger.beamgrpc.level = WARN
appender.main.name = MainAppender
appender.main.type = RollingFile
appender.main.append = true
appender.main.fileName = ${sys:log.file}
appender.main.filePattern = ${sys:log.file}.%i
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
appender.main.policies.type = Policies
appender.main.policies.size.type = SizeBasedTriggeringPolicy
appender.main.policies.size.size = 100MB
appender.main.strategy.type = DefaultRolloverStrategy
appender.main.strategy.max = 5
EOF
  echo "127.0.0.1:$rest_port" > "$DIR/rest-address"
}

# ---------------------------------------------------------------- launching
# launch NAME MAIN_CLASS JVM_OPTS... -- ARGS...: one JVM in the background, its pid in
# pids/NAME.pid, its log in log/NAME.log and its stdout/stderr in log/NAME.out.
launch() {
  local name="$1" main="$2"; shift 2
  local jvm=() pid
  while [[ "$1" != "--" ]]; do jvm+=("$1"); shift; done
  shift
  echo "===== $(date -u +%Y-%m-%dT%H:%M:%SZ) cluster.sh: starting $name" >> "$LOGS/$name.out"
  # From the cluster's folder, so that nothing a JVM writes to its working dir lands
  # elsewhere; FLINK_PLUGINS_DIR is where a distribution keeps its (here: no) plugins.
  cd "$DIR"
  FLINK_PLUGINS_DIR="$DIR/plugins" nohup java "${jvm[@]}" "${JAVA_MODULE_OPTS[@]}" -XX:+IgnoreUnrecognizedVMOptions \
    -Djava.awt.headless=true -Dfrontierflow.process="$name" \
    -Dlog.file="$LOGS/$name.log" -Dlog4j.configurationFile="file:$CONF/log4j.properties" \
    -cp "$CP" "$main" --configDir "$CONF" "$@" >>"$LOGS/$name.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" > "$PIDS/$name.pid"
  log "started $name (pid $pid), log: $LOGS/$name.log"
}

start_jobmanager() {
  launch jobmanager "$JM_CLASS" \
    "-Xms${JM_HEAP}m" "-Xmx${JM_HEAP}m" "-XX:MaxMetaspaceSize=${JM_METASPACE}m" \
    "-XX:MaxDirectMemorySize=${JM_OFF_HEAP}m" -- --executionMode cluster
}

# start_taskmanager N: a TaskManager with a fresh resource id (a replacement for a killed
# one must not be mistaken for it), echoed on stdout.
start_taskmanager() {
  local n="$1" id
  id="taskmanager-$n-$(date +%s%N | cut -c1-13)"
  mkdir -p "$DIR/tmp/taskmanager-$n"
  launch "taskmanager-$n" "$TM_CLASS" \
    "-Xms$((TM_FRAMEWORK_HEAP + TM_TASK_HEAP))m" "-Xmx$((TM_FRAMEWORK_HEAP + TM_TASK_HEAP))m" \
    "-XX:MaxDirectMemorySize=$((TM_FRAMEWORK_OFF_HEAP + TM_TASK_OFF_HEAP + TM_NETWORK))m" \
    "-XX:MaxMetaspaceSize=${TM_METASPACE}m" \
    -- -D "taskmanager.resource-id=$id" -D "io.tmp.dirs=$DIR/tmp/taskmanager-$n" >&2
  echo "$id" > "$PIDS/taskmanager-$n.id"
  echo "$id"
}

fail_start() {
  log "$1; last lines of the logs in $LOGS:"
  local f
  for f in "$LOGS"/*.out "$LOGS"/*.log; do
    [[ -f "$f" ]] || continue
    echo "--- $f" >&2
    grep -E 'ERROR|Exception|Caused by' "$f" | tail -n 8 >&2 || tail -n 8 "$f" >&2
  done
  exit 1
}

# check_alive NAME...: fail if one of the named processes has died.
check_alive() {
  local name
  for name in "$@"; do
    live_pid "$name" >/dev/null || fail_start "$name exited during start-up"
  done
}

# ---------------------------------------------------------------- commands
cmd_start() {
  command -v java >/dev/null || die "java not found (Flink 1.19 runs on Java 11 or 17)"
  local version names=(jobmanager) n deadline state
  version="$(flink_version)"
  CP="$(cluster_classpath "$version")"
  for n in $(seq 1 "$N_TM"); do names+=("taskmanager-$n"); done
  if live_pid jobmanager >/dev/null; then
    log "JobManager already running in $DIR"
  else
    for n in $(seq 1 "$N_TM"); do stop_process "taskmanager-$n"; done  # orphans of a crash
    write_config
    log "starting Flink $version: JobManager on $(cat "$DIR/rest-address"), $N_TM TaskManagers x $SLOTS slots"
    start_jobmanager
  fi
  for n in $(seq 1 "$N_TM"); do
    live_pid "taskmanager-$n" >/dev/null || start_taskmanager "$n" >/dev/null
  done
  deadline=$((SECONDS + START_TIMEOUT))
  until state="$(registered)" && [[ "$state" == "$N_TM $((N_TM * SLOTS))" ]]; do
    check_alive "${names[@]}"
    (( SECONDS < deadline )) ||
      fail_start "not $N_TM TaskManagers with $((N_TM * SLOTS)) slots within ${START_TIMEOUT}s (${state:-no answer})"
    sleep 0.5
  done
  log "cluster ready after ${SECONDS}s: $N_TM TaskManagers, $((N_TM * SLOTS)) slots"
  rest_address
}

cmd_stop() {
  local purge=0 f name
  [[ "${1:-}" == "--purge" ]] && purge=1
  if [[ -d "$PIDS" ]]; then
    # TaskManagers first, so that the JobManager does not restart tasks on them.
    for f in "$PIDS"/taskmanager-*.pid "$PIDS"/jobmanager.pid; do
      [[ -f "$f" ]] || continue
      name="$(basename "$f" .pid)"
      stop_process "$name"
    done
    log "stopped after ${SECONDS}s"
  else
    log "no cluster in $DIR: nothing to stop"
  fi
  if (( purge )); then
    log "purging $DIR"
    rm -rf "$DIR"
  fi
}

cmd_status() {
  local f name pid running=0 stopped=0
  [[ -d "$PIDS" ]] || { log "no cluster in $DIR"; return 1; }
  for f in "$PIDS"/*.pid; do
    [[ -f "$f" ]] || continue
    name="$(basename "$f" .pid)"
    if pid="$(live_pid "$name")"; then echo "$name running (pid $pid)"; running=$((running + 1))
    else echo "$name not running"; stopped=$((stopped + 1)); fi
  done
  echo "REST $(rest_address): $(rest GET /overview 2>/dev/null || echo 'no answer')"
  # Success only when something was started and all of it is still running.
  (( running > 0 && stopped == 0 ))
}

cmd_kill_taskmanager() {
  local n="$1" pid
  pid="$(live_pid "taskmanager-$n")" || die "TaskManager $n is not running"
  log "SIGKILL TaskManager $n (pid $pid)"
  kill -KILL "$pid"
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while is_alive "$pid"; do
    (( SECONDS < deadline )) || die "TaskManager $n (pid $pid) survived SIGKILL"
    sleep 0.1
  done
  rm -f "$PIDS/taskmanager-$n.pid"
}

cmd_start_taskmanager() {
  local n="$1" id deadline
  live_pid jobmanager >/dev/null || die "the JobManager is not running (run: $0 start)"
  live_pid "taskmanager-$n" >/dev/null && die "TaskManager $n is already running"
  CP="$(cluster_classpath "$(flink_version)")"
  id="$(start_taskmanager "$n")"
  deadline=$((SECONDS + START_TIMEOUT))
  until registered "$id"; do
    check_alive jobmanager "taskmanager-$n"
    (( SECONDS < deadline )) || fail_start "TaskManager $n ($id) did not register within ${START_TIMEOUT}s"
    sleep 0.5
  done
  log "TaskManager $n registered as $id after ${SECONDS}s"
}

cmd_jobs() {
  rest GET /jobs/overview | "$PYTHON" -c '
import json, sys
for job in json.load(sys.stdin)["jobs"]:
    print(job["jid"], job["state"], job["name"])'
}

# savepoint_op JOB_ID stop|savepoint: trigger, then poll the asynchronous operation until
# it completes; print the savepoint's path. `stop` takes the savepoint with cancel-job and
# waits until the job has ended. Not Flink's stop-with-savepoint (`POST /jobs/<id>/stop`):
# before its savepoint, Flink calls every operator's finish(), and Beam's Flink runner
# (2.62) drains there: its sources emit the end-of-time watermark, every event-time timer
# fires, every window fires, and state in the global window is cleared; the savepoint then
# holds a drained job, and what was waiting for a timer is gone. A savepoint that cancels
# the job snapshots it as it runs, like a checkpoint.
#
# A task that is still starting or is closing (a Beam Impulse source ends once it has
# emitted its one element) declines the savepoint; Flink then leaves the job running and
# untouched, and the savepoint is triggered again, up to SAVEPOINT_ATTEMPTS times in all.
savepoint_op() {
  local job="$1" op="$2" attempt result
  for ((attempt = 1; ; attempt++)); do
    result="$(savepoint_once "$job" "$op")"
    case "$result" in
      OK\ *) echo "${result#OK }"; return 0 ;;
      DECLINED\ *)
        if ((attempt < SAVEPOINT_ATTEMPTS)) && [[ "$(job_state "$job")" == RUNNING ]]; then
          log "savepoint $attempt of job $job declined by a task (${result#DECLINED }); again"
          sleep 1
          continue
        fi
        die "savepoint of job $job failed: ${result#DECLINED }" ;;
      *) die "savepoint of job $job failed: ${result#FAILED }" ;;
    esac
  done
}

# savepoint_once JOB_ID stop|savepoint: one savepoint; prints "OK <path>" (for `stop`,
# once the job has ended), "DECLINED <cause>" when a task declined it, "FAILED <cause>".
savepoint_once() {
  local job="$1" op="$2" body trigger deadline result cancel=false
  [[ "$op" == stop ]] && cancel=true
  body="{\"target-directory\": \"file://$DIR/savepoints\", \"cancel-job\": $cancel}"
  trigger="$(rest POST "/jobs/$job/savepoints" "$body" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["request-id"])')" ||
    die "could not trigger a savepoint of job $job"
  deadline=$((SECONDS + SAVEPOINT_TIMEOUT))
  while :; do
    result="$(rest GET "/jobs/$job/savepoints/$trigger" | "$PYTHON" -c '
import json, sys
r = json.load(sys.stdin)
if r["status"]["id"] != "COMPLETED":
    print("IN_PROGRESS")
elif "location" in r.get("operation", {}):
    print("OK " + r["operation"]["location"])
else:
    cause = json.dumps(r.get("operation", {}).get("failure-cause", r))
    verdict = "DECLINED" if "Checkpoint was declined" in cause else "FAILED"
    print(verdict + " " + cause[:2000])')"
    case "$result" in
      OK\ *) [[ "$cancel" == true ]] && wait_job_ended "$job"; echo "$result"; return 0 ;;
      DECLINED\ * | FAILED\ *) echo "$result"; return 0 ;;
    esac
    (( SECONDS < deadline )) || die "savepoint of job $job not done within ${SAVEPOINT_TIMEOUT}s"
    sleep 0.5
  done
}

# job_state JOB_ID: the job's state as Flink's REST API gives it (RUNNING, CANCELED, ...).
job_state() {
  rest GET "/jobs/$1" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["state"])'
}

# wait_job_ended JOB_ID: poll until the job is CANCELED, FAILED or FINISHED.
wait_job_ended() {
  local job="$1" deadline=$((SECONDS + SAVEPOINT_TIMEOUT)) state
  until state="$(job_state "$job")" &&
    [[ "$state" =~ ^(CANCELED|FAILED|FINISHED)$ ]]; do
    (( SECONDS < deadline )) || die "job $job still ${state:-unknown} ${SAVEPOINT_TIMEOUT}s after its savepoint"
    sleep 0.5
  done
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit "${1:-2}"; }

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  start) cmd_start ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status ;;
  address) rest_address ;;
  kill-taskmanager) [[ $# -eq 1 ]] || usage; cmd_kill_taskmanager "$1" ;;
  start-taskmanager) [[ $# -eq 1 ]] || usage; cmd_start_taskmanager "$1" ;;
  jobs) cmd_jobs ;;
  savepoint) [[ $# -eq 1 ]] || usage; savepoint_op "$1" savepoint ;;
  stop-job) [[ $# -eq 1 ]] || usage; savepoint_op "$1" stop ;;
  help|-h|--help) usage 0 ;;
  *) usage ;;
esac
