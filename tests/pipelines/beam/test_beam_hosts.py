"""Both Beam forms apply the frontier's host rule as the embedded engine does: a deferred
answer (a 429 with Retry-After) pauses its host, counts no page, and every entry emitted
inside the pause leaves held until it ends (`not_before`), on the bounded form and on the
unbounded one at any clock window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.beam.stream_replay import run_beam_stream_replay
from frontierflow.pipelines.core.step import is_repeat_fetch

LOCAL = ["--runner=FnApiRunner"]
DEFERRED = (20, 120, 220)


def _waiting(records: list[dict[str, Any]], expected: dict[str, Any]) -> dict[str, Any]:
    """The embedded engine's latest entries of the URLs not fetched after them."""
    last_fetch: dict[str, int] = {}
    last_cycle: dict[str, int] = {}
    for r in records:
        if r.get("will_retry") or is_repeat_fetch(last_cycle.get(r["url"]), r["cycle"]):
            continue
        last_cycle[r["url"]] = r["cycle"]
        last_fetch[r["url"]] = r["fetched_at"]
    return {u: e for u, e in expected.items() if e["emitted_at"] > last_fetch.get(u, -1)}


@pytest.mark.parametrize("form", ["bounded", "stream:1", "stream:40"])
def test_beam_holds_the_entries_the_engine_holds(
    beam_replay_case: Any, tmp_path: Path, form: str
) -> None:
    log = tmp_path / "events.avro"
    records = beam_replay_case.write_log(log, deferred=DEFERRED)
    expected, expected_states = beam_replay_case.embedded(log, tmp_path, "bfs")
    waiting = _waiting(records, expected)
    held = {u for u, e in waiting.items() if e["not_before"] is not None}
    # each 429 pauses its host 100 ms from its own time: worked out from the log itself
    pauses = {
        r["host"]: (r["fetched_at"], r["fetched_at"] + 100) for r in records if r.get("will_retry")
    }
    assert held == {
        u
        for u, e in waiting.items()
        if e["host"] in pauses and pauses[e["host"]][0] <= e["emitted_at"] < pauses[e["host"]][1]
    }
    assert len(held) >= 5
    assert all(waiting[u]["not_before"] == pauses[waiting[u]["host"]][1] for u in held)

    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    if form == "bounded":
        run_beam_replay(
            log, strategy_name="bfs", out_prefix=str(prefix), budget=beam_replay_case.budget,
            beam_args=LOCAL,
        )  # fmt: skip
    else:
        run_beam_stream_replay(
            log, strategy_name="bfs", out_prefix=str(prefix), budget=beam_replay_case.budget,
            windows=ClockWindows(int(form.split(":")[1])), beam_args=LOCAL,
        )  # fmt: skip
    entries, states, _ = beam_replay_case.beam(prefix)
    assert entries == waiting
    assert states == expected_states
