"""IECA+ on Beam equals IECA+ on the embedded engine: the bounded replay and the streaming
form with one page per clock window, on the replay case's log with IECA+'s echo key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.stream_replay import run_beam_stream_replay
from frontierflow.pipelines.strategies.ieca_plus import ECHO_DISTANCE
from frontierflow.schemas.container import write_container

LOCAL = ["--runner=FnApiRunner"]


def _with_ieca_plus_echo(case: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case's log, its parents' distances echoed under IECA+'s key (`ieca+.d`), so the
    routing reads them instead of taking every parent for a starting page."""
    write_ieca_log = case.write_log

    def write_log(
        path: Path, events: int = 300, deferred: tuple[int, ...] = ()
    ) -> list[dict[str, Any]]:
        records = [
            {**r, "echo": {ECHO_DISTANCE if k == "ieca.d" else k: v for k, v in r["echo"].items()}}
            for r in write_ieca_log(path, events, deferred)
        ]
        assert sum(ECHO_DISTANCE in r["echo"] for r in records) > events // 2
        write_container(path, "FetchEvent", records)
        return records

    monkeypatch.setattr(case, "write_log", write_log)


def test_bounded_replay_equals_embedded(
    beam_replay_case: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_ieca_plus_echo(beam_replay_case, monkeypatch)
    beam_replay_case.check_equal(tmp_path, "ieca-plus", LOCAL)


@pytest.mark.slow
def test_stream_one_page_windows_equal_embedded(
    beam_replay_case: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_ieca_plus_echo(beam_replay_case, monkeypatch)
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=60)  # one page per 1 ms window: the exact clock
    _, expected_states = beam_replay_case.embedded(log, tmp_path, "ieca-plus")
    prefix = tmp_path / "stream" / "out"
    prefix.parent.mkdir()
    run_beam_stream_replay(
        log,
        strategy_name="ieca-plus",
        out_prefix=str(prefix),
        budget=beam_replay_case.budget,
        windows=ClockWindows(1),
        beam_args=LOCAL,
    )
    entries, states, dead = beam_replay_case.beam(prefix)
    assert states == expected_states
    assert len(states) > 300 and entries
    assert len(dead) == 1
