"""A WARC written by a real tool: `wget --warc-file` crawls a small site that Python's HTTP
server serves on 127.0.0.1, and the WARC replays through the embedded engine and the
bounded Beam replay to the same frontier."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from frontierflow.connectors.base import Failed
from frontierflow.connectors.logs import read_fetch_events
from frontierflow.schemas.records import FetchEvent

pytestmark = pytest.mark.skipif(shutil.which("wget") is None, reason="wget is not installed")

WGET_TIMEOUT_S = 120

#: page → its links (relative hrefs), written as HTML; "notes.txt" is plain text.
SITE: dict[str, list[str]] = {
    "index.html": ["guide/intro.html", "guide/sockets.html", "notes.txt", "missing.html"],
    "guide/intro.html": ["sockets.html", "../index.html", "tcp/ports.html"],
    "guide/sockets.html": ["tcp/ports.html", "tcp/udp.html#top", "intro.html"],
    "guide/tcp/ports.html": ["udp.html", "../../index.html"],
    "guide/tcp/udp.html": ["ports.html?view=all", "http://other.invalid/away.html"],
}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    """The site's root URL, served from a folder the test writes, until the test ends."""
    root = tmp_path / "site"
    for page, links in SITE.items():
        path = root / page
        path.parent.mkdir(parents=True, exist_ok=True)
        anchors = " ".join(f'<a href="{href}">{Path(href).stem}</a>' for href in links)
        path.write_text(
            f"<html><body><p>page {Path(page).stem} tcp socket</p>{anchors}</body></html>"
        )
    (root / "notes.txt").write_text("plain text, no links\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def wget_warc(root_url: str, tmp: Path) -> Path:
    """`wget --recursive --warc-file` of the site; the WARC it wrote."""
    warc = tmp / "crawl"
    result = subprocess.run(
        [
            "wget",
            "--recursive",
            "--level=5",
            "--no-verbose",
            "-e",
            "robots=off",
            f"--warc-file={warc}",
            "--directory-prefix",
            str(tmp / "mirror"),
            root_url,
        ],
        capture_output=True,
        timeout=WGET_TIMEOUT_S,
        check=False,
    )
    assert result.returncode in (0, 8), result.stderr  # 8: the server answered 404 once
    return tmp / "crawl.warc.gz"


def test_wget_warc_becomes_fetch_events(site: str, tmp_path: Path) -> None:
    warc = wget_warc(site, tmp_path)
    items = list(read_fetch_events(warc))
    events = {i.url: i for _, i, _ in items if isinstance(i, FetchEvent)}
    failed = [i for _, i, _ in items if isinstance(i, Failed)]
    pages = {site + page for page in SITE}
    # the start URL, and the query wget kept (the server ignores it: ports.html again);
    # wget stays on its host, so other.invalid is a link only
    also = {site, site + "guide/tcp/ports.html?view=all", site + "missing.html"}
    assert set(events) == pages | also
    assert events[site + "missing.html"].status == 404
    assert [(f.error_class, site + "notes.txt" in f.message) for f in failed] == [("NotHtml", True)]
    # wget fetched each page from the first page that linked it (its Referer)
    index = events[site]
    assert index.via is None and index.status == 200
    assert events[site + "guide/intro.html"].via == site
    assert events[site + "index.html"].via == site + "guide/intro.html"
    assert events[site + "guide/tcp/ports.html"].via == site + "guide/intro.html"
    assert events[site + "guide/tcp/udp.html"].via == site + "guide/sockets.html"
    assert events[site + "guide/sockets.html"].outlinks == (
        site + "guide/tcp/ports.html",
        site + "guide/tcp/udp.html",
        site + "guide/intro.html",
    )
    assert index.terms == {
        "page": 1,
        "index": 1,
        "tcp": 1,
        "socket": 1,
        "intro": 1,
        "sockets": 1,
        "notes": 1,
        "missing": 1,
    }
    assert all(
        e.host == "127.0.0.1" and e.fetch_ms == 0.0 and e.echo == {} for e in events.values()
    )
    assert index.bytes == len((tmp_path / "site" / "index.html").read_bytes())


def test_wget_warc_replays_the_same_on_beam(
    site: str, tmp_path: Path, beam_replay_case: Any
) -> None:
    warc = wget_warc(site, tmp_path)
    entries, states, dead, runs = beam_replay_case.check_log_equal(
        warc, tmp_path, "ieca", ["--runner=FnApiRunner"], fill_echo=True
    )
    assert set(states) >= {site + page for page in SITE}
    assert "http://other.invalid/away.html" in entries  # linked, never fetched
    assert [line for line in dead if "NotHtml" in line]
    assert runs > 1  # echoes were filled in rounds
