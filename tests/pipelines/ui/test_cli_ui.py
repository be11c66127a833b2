"""`--ui-port` on the command line: `replay` serves the page while it runs and closes it
at the end; the Beam runners refuse it (the page watches the embedded engine)."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.cli import main
from frontierflow.pipelines.ui import server as ui_server
from frontierflow.schemas.container import write_container


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_replay_serves_the_page_while_it_runs(
    tmp_path: Path, fetch_events: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = fetch_events(
        200, seed=2, pages=150, url="https://h{host}.e/{page}", hosts=7, max_outlinks=5
    )
    log = tmp_path / "events.avro"
    write_container(log, "FetchEvent", records)
    port = _free_port()
    seen: list[dict[str, Any]] = []
    closing = ui_server.UiServer.close

    def close_after_a_look(self: ui_server.UiServer) -> None:
        """Just before the replay closes its page: what the page says at the end."""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/summary", timeout=10) as r:
            seen.append(json.load(r))
        closing(self)

    monkeypatch.setattr(ui_server.UiServer, "close", close_after_a_look)
    argv = [
        "replay",
        str(log),
        "--state-dir",
        str(tmp_path / "s"),
        "--out",
        str(tmp_path / "out.jsonl"),
        "--step-size",
        "20",
        "--ui-port",
        str(port),
    ]
    assert main(argv) == 0
    (summary,) = seen
    assert summary["job"]["command"] == "replay"
    assert summary["totals"]["events"] == len({r["url"] for r in records})
    assert summary["totals"]["steps"] >= 10
    with pytest.raises(ConnectionRefusedError):  # closed with the replay
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_replay_on_beam_refuses_the_page(tmp_path: Path) -> None:
    argv = [
        "replay",
        str(tmp_path / "x.avro"),
        "--out",
        str(tmp_path / "o"),
        "--runner",
        "beam",
        "--ui-port",
        "0",
    ]
    assert main(argv) == 2
