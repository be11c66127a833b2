#!/usr/bin/env bash
# Bring Beam's Flink job server (the jar that Beam's Python FlinkRunner starts with
# `java -jar`) to this machine through Maven, by coordinates only.
#
#   infra/flink/fetch-job-server.sh
#
# On success prints exactly one line on stdout, the jar's path; every other message goes to
# stderr. Give it to Beam with `--flink_job_server_jar=<path>`, so that Beam never tries to
# download a job server itself. Skips all work when a jar is already in the cache
# (${XDG_CACHE_HOME:-~/.cache}/frontierflow/flink/).
#
# It tries, in this order, and takes the first that resolves:
#   1. the published shaded job server
#        org.apache.beam:beam-runners-flink-<FLINK_VERSION>-job-server:<BEAM_VERSION>
#      copied into the cache as is;
#   2. the same job server assembled from the Flink runner library and its dependencies
#        org.apache.beam:beam-runners-flink-<FLINK_VERSION>:<BEAM_VERSION>
#      (+ flink-statebackend-rocksdb, which the library only declares as `provided`, and an
#      SLF4J binding): the jars are copied into a folder beside a small launcher jar whose
#      manifest names the main class org.apache.beam.runners.flink.FlinkJobServerDriver
#      and lists them on its Class-Path (relative), so `java -jar launcher.jar` is the job
#      server, as with the shaded jar;
#   3. step 2 at FLINK_RUNNER_FALLBACK_VERSION, for registries that serve neither of the
#      above at the pinned Beam version (see README.md: the job server speaks the portable
#      Job API, so the Python SDK can be newer than it).
#
# The assembled job server also carries Beam's Java KafkaIO (beam-sdks-java-io-kafka without
# its Confluent schema-registry extras, kafka-clients, and jamm for the Java SDK harness that
# Flink embeds), and a second launcher beside it: the expansion service that turns the
# Python pipeline's Kafka read into KafkaIO (the streaming form on Flink reads through it,
# a Java source whose watermark Flink tracks). Print that launcher's path instead of the
# job server's with
#
#   infra/flink/fetch-job-server.sh --kafka-expansion-service
#
# Environment (all optional):
#   BEAM_VERSION                   default: the apache-beam pin in pyproject.toml, else the
#                                  installed apache_beam's version
#   FLINK_VERSION                  Flink minor version of the runner (1.19)
#   FLINK_RUNNER_FALLBACK_VERSION  Beam version for step 3 (2.62.0); "" disables step 3
#   FLINK_JOB_SERVER_CACHE         cache dir (${XDG_CACHE_HOME:-~/.cache}/frontierflow/flink)
#   FLINK_JOB_SERVER_REFRESH=1     ignore the cache and resolve again from step 1
#   PYTHON                         python3, used for the version fallback and the manifest
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
FLINK_VERSION="${FLINK_VERSION:-1.19}"
FALLBACK="${FLINK_RUNNER_FALLBACK_VERSION-2.62.0}"
CACHE="${FLINK_JOB_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/flink}"
MAIN_CLASS="org.apache.beam.runners.flink.FlinkJobServerDriver"
EXPANSION_MAIN_CLASS="org.apache.beam.sdk.expansion.service.ExpansionService"
# KafkaIO's client library (its POM leaves the version to the user; 3.9 speaks to the 4.x
# broker of infra/kafka and keeps the consumer API that KafkaIO 2.62 calls) and jamm, which
# the Java SDK harness needs and declares as provided.
KAFKA_CLIENTS="${KAFKA_CLIENTS_VERSION:-3.9.1}"
JAMM=0.4.0
# What Flink's own launcher opens for Java 17 (env.java.opts.all), in manifest form.
ADD_OPENS="java.base/java.lang java.base/java.lang.reflect java.base/java.io java.base/java.net java.base/java.nio java.base/sun.nio.ch java.base/java.text java.base/java.time java.base/java.util java.base/java.util.concurrent java.base/java.util.concurrent.atomic java.base/java.util.concurrent.locks"

log() { echo "[flink-job-server] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- versions
BEAM="${BEAM_VERSION:-}"
if [[ -z "$BEAM" && -f "$REPO/pyproject.toml" ]]; then
  BEAM="$(sed -n 's/.*"apache-beam\(\[[^]]*\]\)\{0,1\}==\([0-9][0-9.]*\)".*/\2/p' \
    "$REPO/pyproject.toml" | head -n1)"
fi
if [[ -z "$BEAM" ]]; then
  BEAM="$("$PYTHON" -c 'import apache_beam; print(apache_beam.__version__)' 2>/dev/null)" ||
    die "no apache-beam==X.Y.Z pin in pyproject.toml and apache_beam is not importable"
fi
[[ "$BEAM" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "unexpected Beam version '$BEAM'"
[[ "$FLINK_VERSION" =~ ^[0-9]+\.[0-9]+$ ]] || die "unexpected Flink version '$FLINK_VERSION'"

published_jar() { echo "$CACHE/beam-runners-flink-$FLINK_VERSION-job-server-$1.jar"; }
assembled_jar() { echo "$CACHE/beam-runners-flink-$FLINK_VERSION-job-server-$1-launcher.jar"; }
expansion_jar() { echo "$CACHE/beam-runners-flink-$FLINK_VERSION-job-server-$1-kafka-expansion-launcher.jar"; }
# The project's one Java class (java/frontierflow/flink/ClusterClassPath.java), compiled
# into the job server's lib folder: with it a job on the session cluster of cluster.sh,
# which has the job server's class path as its own, stages no jars (README.md).
STAGER_JAR=frontierflow-cluster-classpath.jar
# An assembled jar counts only with its .complete marker (written last), the Kafka
# expansion launcher beside it and, where javac exists, the class above (a cache from
# before either was added is assembled again).
assembled_ok() {
  local jar; jar="$(assembled_jar "$1")"
  [[ -f "$jar" && -f "$jar.complete" && -f "$(expansion_jar "$1")" ]] &&
    { [[ -f "${jar%.jar}.lib/$STAGER_JAR" ]] || ! command -v javac >/dev/null; }
}

WANT=job-server
case "${1:-}" in
  --kafka-expansion-service) WANT=expansion ;;
  "") ;;
  *) die "unknown argument '$1' (only --kafka-expansion-service)" ;;
esac
# The launcher asked for, given the job server's jar.
answer() {
  if [[ "$WANT" == job-server ]]; then echo "$1"; return 0; fi
  local e="${1%-launcher.jar}-kafka-expansion-launcher.jar"
  [[ "$1" == *-launcher.jar && -f "$e" ]] ||
    die "no Kafka expansion service beside $1 (a published job server has its own; see README.md)"
  echo "$e"
}

# ---------------------------------------------------------------- cache
cached() {
  if [[ -f "$(published_jar "$BEAM")" ]]; then published_jar "$BEAM"; return 0; fi
  if assembled_ok "$BEAM"; then assembled_jar "$BEAM"; return 0; fi
  if [[ -n "$FALLBACK" ]] && assembled_ok "$FALLBACK"; then assembled_jar "$FALLBACK"; return 0; fi
  return 1
}

if [[ "${FLINK_JOB_SERVER_REFRESH:-0}" != 1 ]] && jar="$(cached)"; then
  log "cached: $jar"
  answer "$jar"
  exit 0
fi

command -v mvn >/dev/null || die "mvn not found (needed once to resolve the job server)"
command -v java >/dev/null || die "java not found (the job server needs Java 11 or 17)"
mkdir -p "$CACHE"

# One resolution at a time (two pytest sessions, or CI and a developer).
if command -v flock >/dev/null; then
  exec 9>"$CACHE/.lock"
  flock 9
  if [[ "${FLINK_JOB_SERVER_REFRESH:-0}" != 1 ]] && jar="$(cached)"; then
    log "resolved meanwhile by another process: $jar"
    answer "$jar"
    exit 0
  fi
fi

WORK="$(mktemp -d "$CACHE/.work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# write_pom DIR DEPENDENCY_XML...: a throwaway pom that only lists dependencies.
write_pom() {
  local dir="$1"; shift
  mkdir -p "$dir"
  {
    cat <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>frontierflow.infra</groupId>
  <artifactId>flink-job-server</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
EOF
    printf '%s\n' "$@"
    cat <<'EOF'
  </dependencies>
</project>
EOF
  } > "$dir/pom.xml"
}

# copy_deps DIR: resolve DIR/pom.xml's runtime dependencies into DIR/lib (-U: a miss cached
# by an earlier run is asked again).
copy_deps() {
  (cd "$1" && mvn -B -ntp -U dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$1/lib") > "$1/mvn.log" 2>&1
}

why() { grep -m1 -o 'Could not [^[]*\|No versions [^[]*\|was not found [^[]*' "$1/mvn.log" || tail -n 5 "$1/mvn.log"; }

# ---------------------------------------------------------------- 1. published jar
try_published() {
  local v="$1" d="$WORK/published-$1" a="beam-runners-flink-$FLINK_VERSION-job-server"
  log "trying org.apache.beam:$a:$v"
  write_pom "$d" "<dependency><groupId>org.apache.beam</groupId><artifactId>$a</artifactId><version>$v</version><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>"
  if ! copy_deps "$d"; then
    log "  not resolved: $(why "$d")"
    return 1
  fi
  [[ -f "$d/lib/$a-$v.jar" ]] || { log "  resolved, but $a-$v.jar is missing"; return 1; }
  mv -f "$d/lib/$a-$v.jar" "$(published_jar "$v")"
  published_jar "$v"
}

# ---------------------------------------------------------------- 2./3. assembled jar
try_assembled() {
  local v="$1" d="$WORK/assembled-$1" a="beam-runners-flink-$FLINK_VERSION"
  log "trying to assemble the job server from org.apache.beam:$a:$v and its dependencies"
  # Only the POM says which Flink patch release the runner was built against.
  write_pom "$d" "<dependency><groupId>org.apache.beam</groupId><artifactId>$a</artifactId><version>$v</version><type>pom</type><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>"
  if ! copy_deps "$d"; then
    log "  not resolved: $(why "$d")"
    return 1
  fi
  local runner_pom="$d/lib/$a-$v.pom" flink=""
  [[ -f "$runner_pom" ]] && flink="$(grep -A2 '<artifactId>flink-runtime</artifactId>' "$runner_pom" |
    sed -n 's/.*<version>\([^<]*\)<\/version>.*/\1/p' | head -n1)"
  [[ -n "$flink" ]] || { log "  no flink-runtime version in $a-$v.pom"; return 1; }
  local slf4j=2.0.16
  rm -rf "$d/lib"
  write_pom "$d" \
    "<dependency><groupId>org.apache.beam</groupId><artifactId>$a</artifactId><version>$v</version>
      <exclusions><exclusion><groupId>commons-logging</groupId><artifactId>commons-logging</artifactId></exclusion></exclusions></dependency>" \
    "<dependency><groupId>org.apache.flink</groupId><artifactId>flink-statebackend-rocksdb</artifactId><version>$flink</version></dependency>" \
    "<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$slf4j</version></dependency>" \
    "<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>$slf4j</version></dependency>" \
    "<dependency><groupId>org.slf4j</groupId><artifactId>jcl-over-slf4j</artifactId><version>$slf4j</version></dependency>" \
    "<dependency><groupId>org.apache.beam</groupId><artifactId>beam-sdks-java-io-kafka</artifactId><version>$v</version>
      <exclusions><exclusion><groupId>io.confluent</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>commons-logging</groupId><artifactId>commons-logging</artifactId></exclusion></exclusions></dependency>" \
    "<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$KAFKA_CLIENTS</version></dependency>" \
    "<dependency><groupId>com.github.jbellis</groupId><artifactId>jamm</artifactId><version>$JAMM</version></dependency>"
  if ! copy_deps "$d"; then
    log "  dependencies not resolved: $(why "$d")"
    return 1
  fi
  log "  resolved $(find "$d/lib" -name '*.jar' | wc -l) jars (Flink $flink)"

  local jar; jar="$(assembled_jar "$v")"
  local libname; libname="$(basename "$jar" .jar).lib"
  rm -rf "${CACHE:?}/$libname" "$jar" "$jar.complete"
  if command -v javac >/dev/null; then
    javac -nowarn --release 11 -cp "$d/lib/beam-sdks-java-core-$v.jar" -d "$d/classes" \
      "$HERE/java/frontierflow/flink/ClusterClassPath.java" >&2 ||
      die "javac could not compile ClusterClassPath.java"
    (cd "$d/classes" && "$PYTHON" -c 'import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for f in sorted(pathlib.Path(".").rglob("*.class")):
        z.write(f)' "$d/lib/$STAGER_JAR")
  else
    log "  no javac: jobs on the session cluster will upload the job server's class path"
  fi
  mv "$d/lib" "$CACHE/$libname"
  # The launcher: a jar holding only a manifest. Class-Path entries are relative to the
  # jar's own folder, so the cache dir can move; lines are wrapped at 72 bytes.
  "$PYTHON" - "$jar" "$libname" "$MAIN_CLASS" "$ADD_OPENS" "$v" "$flink" <<'EOF'
import os, sys, textwrap, zipfile
jar, libname, main_class, add_opens, beam, flink = sys.argv[1:]
libdir = os.path.join(os.path.dirname(jar), libname)
entries = " ".join(f"{libname}/{n}" for n in sorted(os.listdir(libdir)) if n.endswith(".jar"))

def header(name, value):
    line = f"{name}: {value}"
    first, rest = line[:72], line[72:]
    return "\r\n".join([first] + [" " + rest[i:i + 71] for i in range(0, len(rest), 71)]) + "\r\n"

manifest = "".join([
    header("Manifest-Version", "1.0"),
    header("Created-By", "frontierflow infra/flink/fetch-job-server.sh"),
    header("Implementation-Title", f"Beam Flink {flink} job server (assembled)"),
    header("Implementation-Version", beam),
    header("Main-Class", main_class),
    header("Add-Opens", add_opens),
    header("Class-Path", entries),
    "\r\n",
])
tmp = jar + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("META-INF/MANIFEST.MF", manifest)
os.replace(tmp, jar)
EOF
  # The Kafka expansion service: the same class path, Beam's ExpansionService as main class.
  "$PYTHON" - "$jar" "$(expansion_jar "$v")" "$EXPANSION_MAIN_CLASS" <<'EOF'
import os, sys, zipfile
src, dst, main_class = sys.argv[1:]
with zipfile.ZipFile(src) as z:
    lines = z.read("META-INF/MANIFEST.MF").decode().split("\r\n")
lines = [f"Main-Class: {main_class}" if l.startswith("Main-Class: ") else l for l in lines]
with zipfile.ZipFile(dst + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("META-INF/MANIFEST.MF", "\r\n".join(lines))
os.replace(dst + ".tmp", dst)
EOF
  touch "$jar.complete"
  echo "$jar"
}

start=$(date +%s)
if jar="$(try_published "$BEAM")"; then :
elif jar="$(try_assembled "$BEAM")"; then :
elif [[ -n "$FALLBACK" && "$FALLBACK" != "$BEAM" ]] &&
  log "Beam $BEAM's Flink $FLINK_VERSION runner is not served here; falling back to $FALLBACK" &&
  jar="$(try_assembled "$FALLBACK")"; then :
else
  die "no Flink $FLINK_VERSION job server for Beam $BEAM${FALLBACK:+ or $FALLBACK} resolved (see messages above)"
fi
log "ready in $(( $(date +%s) - start )) s: $jar"
answer "$jar"
