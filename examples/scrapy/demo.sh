#!/usr/bin/env bash
# A real Scrapy crawl on loopback: Kafka, the live job, nginx serving the four Debian
# manuals as four virtual hosts, and `scrapy crawl pages` of this project with the
# frontierflow scheduler; crawls PAGES pages, stops everything, and prints
# `frontierflow crawl-report` (pages/s, precision, politeness per host, thread decisions).
#
#   examples/scrapy/demo.sh [OUT_DIR]          (default: ./scrapy-demo)
#
# Environment (optional): PAGES (1000), TOPIC (sockets), STRATEGY (lafc), LAFC_C (0.6),
# DELAY (Scrapy's DOWNLOAD_DELAY, 0.05 s), CONCURRENCY (4), JUDGE (0.5), JUDGE_MIN (5),
# SPEED_WINDOW_MS (5000), FRONTIERFLOW (the frontierflow command), PYTHON.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
infra="$here/../../infra"
out="$(mkdir -p "${1:-scrapy-demo}" && cd "${1:-scrapy-demo}" && pwd)"
PAGES="${PAGES:-1000}"; TOPIC="${TOPIC:-sockets}"; STRATEGY="${STRATEGY:-lafc}"
LAFC_C="${LAFC_C:-0.6}"; DELAY="${DELAY:-0.05}"; CONCURRENCY="${CONCURRENCY:-4}"
JUDGE="${JUDGE:-0.5}"; JUDGE_MIN="${JUDGE_MIN:-5}"; SPEED_WINDOW_MS="${SPEED_WINDOW_MS:-5000}"
FF="${FRONTIERFLOW:-frontierflow}"; PYTHON="${PYTHON:-python3}"
log() { echo "[scrapy-demo] $*" >&2; }

bash "$infra/debian-docs/fetch.sh" >/dev/null
rm -rf "$out/kafka" "$out/nginx" "$out/state"
job=""
cleanup() {
  [[ -n "$job" ]] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null || true
  bash "$infra/debian-docs/serve.sh" stop "$out/nginx" || true
  bash "$infra/kafka/stop.sh" "$out/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

boot="$(PYTHON="$PYTHON" bash "$infra/kafka/start.sh" "$out/kafka")"
addr="$(bash "$infra/debian-docs/serve.sh" start "$out/nginx")"
port="${addr##*:}"
resolve=(); follow=(); seeds=(); map=()
for p in linux-doc-6.1 python3.11-doc postgresql-doc-15 openjdk-17-doc; do
  resolve+=("$p.docs.test:$port:127.0.0.1")
  follow+=("$p.docs.test:$port")
  seeds+=("http://$p.docs.test:$port/index.html")
  map+=(--map "http://$p.docs.test:$port/=https://$p.docs.invalid/")
done
log "Kafka on $boot, the manuals on $addr; Scrapy crawls $PAGES pages on $TOPIC with $STRATEGY"

"$PYTHON" -c "import sys; from frontierflow.connectors.kafka import KafkaSettings, ensure_topics; ensure_topics(KafkaSettings(sys.argv[1]))" "$boot"
"$FF" run --bootstrap-servers "$boot" --strategy "$STRATEGY" --topic "$TOPIC" --lafc-c "$LAFC_C" \
  --state-dir "$out/state" --budget "$PAGES" --speed-window-ms "$SPEED_WINDOW_MS" \
  >"$out/job.log" 2>&1 &
job=$!
"$FF" seed --bootstrap-servers "$boot" --crawl-id demo "${seeds[@]}" 2>>"$out/job.log"
start=$(date +%s.%N)
(cd "$here" && "$PYTHON" -m scrapy crawl pages \
  -s FRONTIERFLOW_BOOTSTRAP_SERVERS="$boot" -s FRONTIERFLOW_FETCHER_ID=f1 \
  -s FRONTIERFLOW_MAX_PAGES="$PAGES" -s FRONTIERFLOW_IDLE_EXIT=30 \
  -s FRONTIERFLOW_RESOLVE="$(IFS=,; echo "${resolve[*]}")" \
  -s FRONTIERFLOW_FOLLOW_HOSTS="$(IFS=,; echo "${follow[*]}")" \
  -s DOWNLOAD_DELAY="$DELAY" -s CONCURRENT_REQUESTS="$CONCURRENCY" \
  -s ROBOTSTXT_OBEY=False) 2>"$out/scrapy.log"
end=$(date +%s.%N)
kill -TERM "$job"; wait "$job" || true; job=""
log "Scrapy done in $("$PYTHON" -c "print(round($end - $start, 1))") s (logs in $out)"
"$FF" crawl-report --bootstrap-servers "$boot" --access-log "$out/nginx/access.log" \
  --fetcher-id f1 --delay "$DELAY" --topic "$TOPIC" --judge "$JUDGE" \
  --judge-min-occurrences "$JUDGE_MIN" --web debian-docs "${map[@]}" 2>>"$out/job.log" \
  | tee "$out/report.md"
