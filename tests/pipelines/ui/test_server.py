"""The operator's page's HTTP server: read-only, loopback-only by Host, a strict
Content-Security-Policy on every answer, and a page that never parses data as HTML."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from importlib import resources

import pytest

from frontierflow.pipelines.ui.server import CONTENT_SECURITY_POLICY, UiServer, is_loopback
from frontierflow.pipelines.ui.summary import LiveSummary


@pytest.fixture
def server() -> Iterator[UiServer]:
    summary = LiveSummary(command="run", strategy="ieca", judges_pages=False)
    running = UiServer(summary, 0).start()
    try:
        yield running
    finally:
        running.close()


def _request(
    server: UiServer, method: str, path: str, host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {} if host is None else {"Host": host}
    conn.request(method, path, headers=headers)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, dict(answer.getheaders()), body


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/static/app.js", "text/javascript; charset=utf-8"),
        ("/static/app.css", "text/css; charset=utf-8"),
        ("/api/summary", "application/json"),
    ],
)
def test_every_answer_carries_the_policy(server: UiServer, path: str, kind: str) -> None:
    status, headers, body = _request(server, "GET", path)
    assert status == 200
    assert headers["Content-Type"] == kind
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    assert len(body) == int(headers["Content-Length"]) > 0


def test_summary_endpoint_is_the_snapshot(server: UiServer) -> None:
    _, _, body = _request(server, "GET", "/api/summary")
    data = json.loads(body)
    assert data["job"]["command"] == "run" and data["job"]["strategy"] == "ieca"
    assert data["totals"]["events"] == 0
    assert data["harvest"] is None


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_nothing_but_reading(server: UiServer, method: str) -> None:
    status, headers, _ = _request(server, method, "/api/summary")
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"


def test_head_and_unknown_paths(server: UiServer) -> None:
    status, headers, body = _request(server, "HEAD", "/")
    assert (status, body) == (200, b"")
    assert int(headers["Content-Length"]) > 0
    assert _request(server, "GET", "/static/../server.py")[0] == 404
    assert _request(server, "GET", "/etc/passwd")[0] == 404


def test_a_loopback_page_answers_only_loopback_host_names(server: UiServer) -> None:
    """A page on another site that rebinds its name to 127.0.0.1 gets nothing."""
    port = server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "127.0.0.2"):
        assert _request(server, "GET", "/api/summary", host=host)[0] == 200, host
    for host in (f"evil.example:{port}", "evil.example", f"10.0.0.1:{port}", ""):
        assert _request(server, "GET", "/api/summary", host=host)[0] == 421, host


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    assert not is_loopback("localhost.evil.example")


def test_the_page_has_no_inline_script_and_never_parses_data_as_html() -> None:
    static = resources.files("frontierflow.pipelines.ui").joinpath("static")
    html = static.joinpath("index.html").read_text()
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, flags=re.S)
    assert scripts == [""]  # one script, from a file: the policy refuses inline ones
    assert 'src="/static/app.js"' in html
    assert re.search(r"\s(style|on[a-z]+)\s*=", html) is None  # no inline style or handler
    script = static.joinpath("app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
