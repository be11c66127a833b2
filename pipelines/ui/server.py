"""The operator's page over HTTP: the standard library's threading server in a daemon thread.

Read-only: GET (and HEAD) of the page, its script and style, and `/api/summary` (the
`LiveSummary` snapshot as JSON); every other method is refused with 405 and no endpoint
takes input. It binds to loopback unless told otherwise and then answers only requests
whose Host names a loopback address (a page elsewhere cannot rebind a name to it and read
the crawl). Every answer carries a strict Content-Security-Policy (scripts and styles from
this origin only, no inline script, no frames), so text from the crawl can never run even
if the page shows it; the page itself builds its DOM with `textContent`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, ClassVar

from frontierflow.pipelines.ui.summary import LiveSummary

log = logging.getLogger(__name__)

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}

LOOPBACK_NAMES = frozenset({"localhost"})


def _static(name: str) -> bytes:
    return resources.files("frontierflow.pipelines.ui").joinpath("static", name).read_bytes()


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is loopback."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name part of a Host header (`[::1]:8080` → `::1`, `a.b:80` → `a.b`)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class _Handler(BaseHTTPRequestHandler):
    server_version = "frontierflow"
    sys_version = ""
    summary: ClassVar[LiveSummary]
    loopback_only: ClassVar[bool]
    files: ClassVar[dict[str, tuple[bytes, str]]]

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _refuse(self) -> None:
        self._send(405, b"read-only: GET only\n", "text/plain; charset=utf-8", False, "GET, HEAD")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def _answer(self, head: bool) -> None:
        if self.loopback_only and not is_loopback(_host_name(self.headers.get("Host", ""))):
            self._send(421, b"this page answers on loopback only\n", "text/plain", head)
            return
        path = self.path.split("?", 1)[0]
        if path == "/api/summary":
            body = json.dumps(self.summary.snapshot(), allow_nan=False).encode()
            self._send(200, body, "application/json", head)
        elif path == "/api/health":
            self._send(200, b'{"ok": true}', "application/json", head)
        elif path in self.files:
            body, kind = self.files[path]
            self._send(200, body, kind, head)
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8", head)

    def _send(
        self, status: int, body: bytes, kind: str, head: bool, allow: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        if allow is not None:
            self.send_header("Allow", allow)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class UiServer:
    """Serves `summary` on host:port (port 0: a free one) from a daemon thread."""

    def __init__(self, summary: LiveSummary, port: int, host: str = "127.0.0.1") -> None:
        files = {path: (_static(name), kind) for path, (name, kind) in STATIC.items()}
        handler = type(
            "UiHandler",
            (_Handler,),
            {"summary": summary, "loopback_only": is_loopback(host), "files": files},
        )
        server = _Server6 if ":" in host else ThreadingHTTPServer  # ":": an IPv6 address
        self.httpd = server((host, port), handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="frontierflow-ui", daemon=True
        )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> UiServer:
        self._thread.start()
        log.info("operator's page on %s", self.url)
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
