#!/usr/bin/env bash
# A real crawl on loopback: Kafka, the live job, nginx serving the four Debian manuals as
# four virtual hosts, the reference fetcher; crawls PAGES pages, stops everything, and
# prints what happened (pages/s, precision, politeness, thread decisions).
#
#   infra/crawl-demo.sh [OUT_DIR]          (default: ./crawl-demo)
#
# Environment (optional): PAGES (1000), TOPIC (sockets), STRATEGY (lafc), LAFC_C (0.6),
# DELAY (0.05 s per host), WORKERS (4), JUDGE (0.5), JUDGE_MIN (5), SPEED_WINDOW_MS (5000),
# FRONTIERFLOW (the frontierflow command), PYTHON (python with the project installed),
# FETCH_ARGS (more options of `frontierflow fetch`, e.g. "--max-lead 1").
#
# Through a shaped link (infra/shape/README.md; Linux, root): TRACE (a time_s<TAB>Mbps
# file) serves the manuals from a network namespace whose link follows the trace
# (`frontierflow shape-link`), RATE_SCALE (1) and SPEEDUP (1) scale and compress it, NETNS
# (ffshape) names the namespace. The crawl then runs for one pass of the trace (PAGES only
# caps it), and the report adds the bandwidth used and the simulator's figures.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(mkdir -p "${1:-crawl-demo}" && cd "${1:-crawl-demo}" && pwd)"
PAGES="${PAGES:-1000}"; TOPIC="${TOPIC:-sockets}"; STRATEGY="${STRATEGY:-lafc}"
LAFC_C="${LAFC_C:-0.6}"; DELAY="${DELAY:-0.05}"; WORKERS="${WORKERS:-4}"
JUDGE="${JUDGE:-0.5}"; JUDGE_MIN="${JUDGE_MIN:-5}"; SPEED_WINDOW_MS="${SPEED_WINDOW_MS:-5000}"
FF="${FRONTIERFLOW:-frontierflow}"; PYTHON="${PYTHON:-python3}"
TRACE="${TRACE:-}"; RATE_SCALE="${RATE_SCALE:-1}"; SPEEDUP="${SPEEDUP:-1}"; NETNS="${NETNS:-ffshape}"
log() { echo "[crawl-demo] $*" >&2; }

bash "$here/debian-docs/fetch.sh" >/dev/null
rm -rf "$out/kafka" "$out/nginx" "$out/state" "$out/shaper.ready"
job=""; fetcher=""; shaper=""
cleanup() {
  [[ -n "$fetcher" ]] && kill -TERM "$fetcher" 2>/dev/null && wait "$fetcher" 2>/dev/null || true
  [[ -n "$job" ]] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null || true
  bash "$here/debian-docs/serve.sh" stop "$out/nginx" || true
  [[ -n "$shaper" ]] && kill -TERM "$shaper" 2>/dev/null && wait "$shaper" 2>/dev/null || true
  bash "$here/kafka/stop.sh" "$out/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

boot="$(PYTHON="$PYTHON" bash "$here/kafka/start.sh" "$out/kafka")"
inside=(); shaped=()
if [[ -n "$TRACE" ]]; then
  "$FF" shape-link --trace "$TRACE" --rate-scale "$RATE_SCALE" --speedup "$SPEEDUP" \
    --netns "$NETNS" --log "$out/shaper.tsv" --ready "$out/shaper.ready" --start-on-sigusr1 \
    2>"$out/shaper.log" &
  shaper=$!
  for _ in $(seq 1 300); do [[ -f "$out/shaper.ready" ]] && break; kill -0 "$shaper" || break; sleep 0.1; done
  [[ -f "$out/shaper.ready" ]] || { log "shape-link failed: $(tail -3 "$out/shaper.log")"; exit 1; }
  export NGINX_ADDR; NGINX_ADDR="$(cat "$out/shaper.ready")"
  inside=(ip netns exec "$NETNS")
  shaped=(--shaper-log "$out/shaper.tsv" --trace "$TRACE" --rate-scale "$RATE_SCALE"
          --speedup "$SPEEDUP" --speed-window-ms "$SPEED_WINDOW_MS")
fi
addr="$("${inside[@]}" bash "$here/debian-docs/serve.sh" start "$out/nginx")"
port="${addr##*:}"; host_addr="${addr%:*}"
pkgs=(linux-doc-6.1 python3.11-doc postgresql-doc-15 openjdk-17-doc)
resolve=(); follow=(); seeds=(); map=()
for p in "${pkgs[@]}"; do
  resolve+=(--resolve "$p.docs.test:$port:$host_addr")
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
  --follow-hosts "$(IFS=,; echo "${follow[*]}")" ${FETCH_ARGS:-} 2>"$out/fetcher.log" &
fetcher=$!
if [[ -n "$TRACE" ]]; then   # one pass of the trace from the first request, then a graceful stop
  while kill -0 "$fetcher" 2>/dev/null && [[ ! -s "$out/nginx/access.log" ]]; do sleep 0.1; done
  kill -USR1 "$shaper"
  while kill -0 "$fetcher" 2>/dev/null && ! grep -qs '^end' "$out/shaper.tsv"; do sleep 0.5; done
  kill -TERM "$fetcher" 2>/dev/null || true
fi
wait "$fetcher" || true; fetcher=""
end=$(date +%s.%N)
kill -TERM "$job"; wait "$job" || true; job=""
log "fetcher done in $("$PYTHON" -c "print(round($end - $start, 1))") s (logs in $out)"
"$FF" crawl-report --bootstrap-servers "$boot" --access-log "$out/nginx/access.log" \
  --delay "$DELAY" --topic "$TOPIC" --judge "$JUDGE" --judge-min-occurrences "$JUDGE_MIN" \
  --web debian-docs "${map[@]}" "${shaped[@]}" 2>>"$out/job.log" | tee "$out/report.md"
