#!/usr/bin/env bash
# Serve HTML trees with nginx on 127.0.0.1 (or NGINX_ADDR), one virtual host per tree: the
# Debian manuals of fetch.sh for a real crawl on loopback (README.md beside this script).
#
#   infra/debian-docs/serve.sh start RUNDIR [NAME=DIR ...]   # prints 127.0.0.1:PORT
#   infra/debian-docs/serve.sh stop RUNDIR
#
# Without NAME=DIR pairs it serves the four manuals fetched by fetch.sh, each as the host
# <package>.docs.test (linux-doc-6.1.docs.test, python3.11-doc.docs.test, ...). Everything
# nginx writes (its generated nginx.conf, pid, temp folders, access.log, error.log) lives
# in RUNDIR; no global nginx configuration is read or edited, and no service is started.
# access.log has one line per request: `msec request_time host "request" status bytes`
# ($msec is when the answer ended: the request started at msec - request_time).
# nginx is installed with apt-get when missing (root, or sudo).
#
# Environment (optional):
#   NGINX_PORT          port to listen on (default: a free one)
#   NGINX_ADDR          address to listen on (default 127.0.0.1; e.g. a shaped link's
#                       namespace address, run inside it: infra/shape/README.md)
#   NGINX_LIMIT_RATE    per-connection send rate (nginx limit_rate, e.g. 200k; default none)
#   DEBIAN_DOCS_CACHE   where fetch.sh unpacked the manuals
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "[serve] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

cmd="${1:-}"; rundir="${2:-}"
[[ -n "$cmd" && -n "$rundir" ]] || { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
shift 2

nginx_bin() {
  if command -v nginx >/dev/null; then command -v nginx; return; fi
  [[ -x /usr/sbin/nginx ]] && { echo /usr/sbin/nginx; return; }
  log "nginx missing: installing it with apt-get"
  local sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx >&2
  command -v nginx 2>/dev/null || echo /usr/sbin/nginx
}

case "$cmd" in
  stop)
    if [[ -f "$rundir/nginx.pid" ]]; then
      pid="$(cat "$rundir/nginx.pid")"
      kill -QUIT "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
      rm -f "$rundir/nginx.pid"
    fi
    exit 0 ;;
  start) ;;
  *) die "unknown command '$cmd' (start or stop)" ;;
esac

sites=("$@")
if [[ ${#sites[@]} -eq 0 ]]; then
  cache="${DEBIAN_DOCS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontierflow/debian-docs}"
  declare -A roots=(
    [linux-doc-6.1]=usr/share/doc/linux-doc-6.1/html
    [python3.11-doc]=usr/share/doc/python3.11/html
    [postgresql-doc-15]=usr/share/doc/postgresql-doc-15/html
    [openjdk-17-doc]=usr/share/doc/openjdk-17-jre-headless/api
  )
  for pkg in linux-doc-6.1 python3.11-doc postgresql-doc-15 openjdk-17-doc; do
    dir="$cache/$pkg/${roots[$pkg]}"
    [[ -d "$dir" ]] || die "$dir missing: run infra/debian-docs/fetch.sh first"
    sites+=("$pkg.docs.test=$dir")
  done
fi

NGINX="$(nginx_bin)"
mkdir -p "$rundir"/{tmp,logs}
rundir="$(cd "$rundir" && pwd)"
addr="${NGINX_ADDR:-127.0.0.1}"
port="${NGINX_PORT:-$(python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$addr")}"
user_line=""
[[ $(id -u) -eq 0 ]] && user_line="user $(id -un) $(id -gn);"   # workers may read /root/...
limit_line=""
[[ -n "${NGINX_LIMIT_RATE:-}" ]] && limit_line="limit_rate ${NGINX_LIMIT_RATE};"

conf="$rundir/nginx.conf"
{
  echo "$user_line"
  echo "worker_processes 1;"
  echo "pid $rundir/nginx.pid;"
  echo "error_log $rundir/error.log warn;"
  echo "events { worker_connections 256; }"
  echo "http {"
  echo "  include /etc/nginx/mime.types;"
  echo "  default_type application/octet-stream;"
  echo "  log_format crawl '\$msec \$request_time \$host \"\$request\" \$status \$body_bytes_sent';"
  echo "  access_log $rundir/access.log crawl;"
  for t in client_body proxy fastcgi uwsgi scgi; do echo "  ${t}_temp_path $rundir/tmp/$t;"; done
  echo "  sendfile on; keepalive_timeout 30; server_tokens off; gzip_static on; $limit_line"
  echo "  server { listen $addr:$port default_server; return 404; }"
  for site in "${sites[@]}"; do
    name="${site%%=*}"; dir="${site#*=}"
    [[ "$name" != "$site" && -d "$dir" ]] || die "expected NAME=DIR with an existing DIR, got '$site'"
    echo "  server { listen $addr:$port; server_name $name; root $dir; index index.html; }"
  done
  echo "}"
} >"$conf"

"$NGINX" -t -q -c "$conf" -p "$rundir" -g "daemon on;" 2>"$rundir/check.log" \
  || die "nginx rejected $conf: $(cat "$rundir/check.log")"
"$NGINX" -c "$conf" -p "$rundir" -g "daemon on;" 2>>"$rundir/error.log" || die "nginx did not start: $(tail -5 "$rundir/error.log")"
up=0
for _ in $(seq 1 100); do   # nginx answers within a second or so; give it 10 s
  if python3 - "$addr" "$port" <<'PY' 2>/dev/null; then up=1; break; fi
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.2).close()
PY
  sleep 0.1
done
[[ $up -eq 1 ]] || die "nginx does not answer on $addr:$port: $(tail -5 "$rundir/error.log")"
log "serving ${#sites[@]} hosts on $addr:$port (access log $rundir/access.log)"
echo "$addr:$port"
