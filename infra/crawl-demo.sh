#!/usr/bin/env bash
# A real crawl on loopback: Kafka, the live job, nginx serving the four Debian manuals as
# four virtual hosts, the reference fetcher; crawls PAGES pages, stops everything, and
# prints what happened (pages/s, precision, politeness, thread decisions).
#
#   infra/crawl-demo.sh [OUT_DIR]          (default: ./crawl-demo)
#
# Environment (optional): PAGES (1000), TOPIC (sockets), STRATEGY (lafc), LAFC_C (0.6),
# DELAY (0.05 s per host), WORKERS (4), JUDGE (0.5), JUDGE_MIN (5), SPEED_WINDOW_MS (5000),
# FRONTIERFLOW (the frontierflow command), PYTHON (python with the project installed).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(mkdir -p "${1:-crawl-demo}" && cd "${1:-crawl-demo}" && pwd)"
PAGES="${PAGES:-1000}"; TOPIC="${TOPIC:-sockets}"; STRATEGY="${STRATEGY:-lafc}"
LAFC_C="${LAFC_C:-0.6}"; DELAY="${DELAY:-0.05}"; WORKERS="${WORKERS:-4}"
JUDGE="${JUDGE:-0.5}"; JUDGE_MIN="${JUDGE_MIN:-5}"; SPEED_WINDOW_MS="${SPEED_WINDOW_MS:-5000}"
FF="${FRONTIERFLOW:-frontierflow}"; PYTHON="${PYTHON:-python3}"
log() { echo "[crawl-demo] $*" >&2; }

bash "$here/debian-docs/fetch.sh" >/dev/null
rm -rf "$out/kafka" "$out/nginx" "$out/state"
job=""
cleanup() {
  [[ -n "$job" ]] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null || true
  bash "$here/debian-docs/serve.sh" stop "$out/nginx" || true
  bash "$here/kafka/stop.sh" "$out/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

boot="$(PYTHON="$PYTHON" bash "$here/kafka/start.sh" "$out/kafka")"
addr="$(bash "$here/debian-docs/serve.sh" start "$out/nginx")"
port="${addr##*:}"
pkgs=(linux-doc-6.1 python3.11-doc postgresql-doc-15 openjdk-17-doc)
resolve=(); follow=(); seeds=(); map=()
for p in "${pkgs[@]}"; do
  resolve+=(--resolve "$p.docs.test:$port:127.0.0.1")
  follow+=("$p.docs.test:$port")
  seeds+=("http://$p.docs.test:$port/index.html")
  map+=(--map "http://$p.docs.test:$port/=https://$p.docs.invalid/")
done
log "Kafka on $boot, the manuals on $addr; crawling $PAGES pages on topic $TOPIC with $STRATEGY"

"$PYTHON" -c "import sys; from frontierflow.connectors.kafka import KafkaSettings, ensure_topics; ensure_topics(KafkaSettings(sys.argv[1]))" "$boot"
"$FF" run --bootstrap-servers "$boot" --strategy "$STRATEGY" --topic "$TOPIC" --lafc-c "$LAFC_C" \
  --state-dir "$out/state" --budget "$PAGES" --speed-window-ms "$SPEED_WINDOW_MS" \
  >"$out/job.log" 2>&1 &
job=$!
"$FF" seed --bootstrap-servers "$boot" --crawl-id demo "${seeds[@]}" 2>>"$out/job.log"
start=$(date +%s.%N)
"$FF" fetch --bootstrap-servers "$boot" --fetcher-id f1 --delay "$DELAY" --workers "$WORKERS" \
  --max-pages "$PAGES" --idle-exit 30 --allow-private "${resolve[@]}" \
  --follow-hosts "$(IFS=,; echo "${follow[*]}")" 2>"$out/fetcher.log"
end=$(date +%s.%N)
kill -TERM "$job"; wait "$job" || true; job=""
log "fetcher done in $("$PYTHON" -c "print(round($end - $start, 1))") s (logs in $out)"
"$FF" crawl-report --bootstrap-servers "$boot" --access-log "$out/nginx/access.log" \
  --delay "$DELAY" --topic "$TOPIC" --judge "$JUDGE" --judge-min-occurrences "$JUDGE_MIN" \
  --web debian-docs "${map[@]}" 2>>"$out/job.log" | tee "$out/report.md"
