"""The unbounded Beam form: the crawl clock from a running count joined in state.

With one page per clock window the clock is exact and the result equals the embedded
engine; with wider windows only the children of events whose stale clock crossed one of
IECA's k-steps may differ (module docstring of `beam_stream`)."""

from __future__ import annotations

import io
import logging
import zlib
from pathlib import Path
from typing import Any, ClassVar

import apache_beam as beam
import pytest
from apache_beam.io.filesystem import FileMetadata, FileSystem, MatchResult
from apache_beam.utils.timestamp import Timestamp
from beam_state import Bag, Cell, Timer

from frontierflow.pipelines.beam import shard_state
from frontierflow.pipelines.beam.event_time import ClockWindows, each_delivery_once, parse_clock
from frontierflow.pipelines.beam.io import (
    READ_PARTS,
    ReadFetchEventLog,
    one_log_file,
    read_log_items,
)
from frontierflow.pipelines.beam.replay import build_replay
from frontierflow.pipelines.beam.routing import WindowRoutes, by_state_shard, window_items
from frontierflow.pipelines.beam.shard_state import state_shard
from frontierflow.pipelines.beam.stream_replay import build_stream_replay, run_beam_stream_replay
from frontierflow.pipelines.beam.stream_update import _ApplyInEventTime
from frontierflow.pipelines.beam.window_batches import (
    BATCH_CODER,
    due_messages,
    held_batch,
    one_per_window,
    pause_runs,
    shard_batch,
    window_batch,
    with_crawl_clock,
)
from frontierflow.pipelines.core.step import FetchKind, is_repeat_fetch
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.ieca import IecaParams, clock_coefficients

LOCAL = ["--runner=FnApiRunner"]


def _run(case: Any, tmp: Path, log: Path, width_ms: int) -> tuple[dict, dict, list[str]]:
    prefix = tmp / f"stream{width_ms}" / "out"
    prefix.parent.mkdir()
    run_beam_stream_replay(
        log,
        strategy_name="ieca",
        out_prefix=str(prefix),
        budget=case.budget,
        windows=ClockWindows(width_ms),
        beam_args=LOCAL,
    )
    return case.beam(prefix)


def _exact_and_stale_clocks(
    records: list[dict[str, Any]], width_ms: int
) -> list[tuple[dict[str, Any], int, int]]:
    """(event, exact clock, windowed clock) of every first fetch, worked out by hand from
    the definitions: exact = pages so far including this one; windowed = pages in earlier
    windows + 1."""
    last: dict[str, int] = {}
    out, crawled, per_window = [], 0, {}
    for r in records:
        if r["url"].startswith("ftp:") or is_repeat_fetch(last.get(r["url"]), r["cycle"]):
            continue
        last[r["url"]] = r["cycle"]
        crawled += 1
        window = r["fetched_at"] // width_ms
        per_window.setdefault(window, crawled - 1)  # pages before the window started
        out.append((r, crawled, per_window[window] + 1))
    return out


@pytest.mark.slow
def test_one_page_windows_equal_embedded(beam_replay_case: Any, tmp_path: Path) -> None:
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=60)  # fetched_at = base + i: one page per 1 ms window
    _, expected_states = beam_replay_case.embedded(log, tmp_path, "ieca")
    entries, states, dead = _run(beam_replay_case, tmp_path, log, 1)
    assert states == expected_states
    assert len(states) > 300 and entries
    assert len(dead) == 1


@pytest.mark.parametrize("pressure", ["compact-always", "rebuild-often"])
def test_shard_state_under_pressure_equals_embedded(
    beam_replay_case: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pressure: str
) -> None:
    """The shard-keyed state (`beam.shard_state`) with its records bag rewritten whole at
    every write, or with the in-memory copies dropped so that shards are rebuilt from the
    bag: still the embedded engine's states (the local runner runs in this process, so the
    patched module is the one it uses)."""
    pressed: list[int] = []
    if pressure == "compact-always":

        def always(records: int, live: int) -> bool:
            pressed.append(records)
            return True

        monkeypatch.setattr(shard_state, "needs_compaction", always)
    else:

        class Forgetful(shard_state.ShardIndexes):
            def get(self, step: str, shard: int, generation: int | None) -> Any:
                found = super().get(step, shard, generation)
                if found is None and generation is not None:
                    pressed.append(shard)  # a shard written before, rebuilt from its bag
                return found

        monkeypatch.setattr(shard_state, "INDEXES", Forgetful(max_urls=0))
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=40)
    _, expected_states = beam_replay_case.embedded(log, tmp_path, "ieca")
    _, states, _ = _run(beam_replay_case, tmp_path, log, 1)
    assert len(pressed) > 20  # the pressure was on
    assert states == expected_states and len(states) > 200


def test_stale_clock_only_touches_children_of_events_across_a_k_step(
    beam_replay_case: Any, tmp_path: Path
) -> None:
    log = tmp_path / "events.avro"
    records = beam_replay_case.write_log(log, events=60)
    _, expected_states = beam_replay_case.embedded(log, tmp_path, "ieca")
    width = 4  # ≤ 4 pages per window: the clock lags by at most 3 pages
    _, states, _ = _run(beam_replay_case, tmp_path, log, width)
    params = IecaParams.for_budget(beam_replay_case.budget)  # k = 120 // 40 = 3
    clocks = _exact_and_stale_clocks(records, width)
    assert max(exact - stale for _, exact, stale in clocks) <= width - 1
    touched = set()
    for r, exact, stale in clocks:
        d_exact, a_exact = clock_coefficients(exact, params)
        d_stale, a_stale = clock_coefficients(stale, params)
        # lag s ≤ 3 = k: at most ⌈3/3⌉ = 1 step of eq. 12, 0.28·3/120 = 0.007
        assert abs(d_exact - d_stale) <= 0.28 * params.k / beam_replay_case.budget + 1e-12
        if (d_exact, a_exact) != (d_stale, a_stale):
            touched.update(r["outlinks"])
    differing = {u for u in expected_states if states.get(u) != expected_states[u]}
    assert touched  # some windows straddle a k-step: the bound is not vacuous
    assert differing  # and the stale clock is visible
    assert differing <= touched
    assert set(states) == set(expected_states)


def test_stateful_steps_have_deterministic_key_coders(
    beam_replay_case: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=5)
    strategy = build_strategy("ieca", budget=beam_replay_case.budget)
    with caplog.at_level(logging.WARNING):
        build_replay(beam.Pipeline(argv=LOCAL), log, strategy, str(tmp_path / "a"))
        build_stream_replay(
            beam.Pipeline(argv=LOCAL), log, strategy, str(tmp_path / "b"), ClockWindows(10)
        )
    assert not [r for r in caplog.records if "deterministic" in r.getMessage()]


def test_the_repeat_step_routes_a_window_with_its_clock_offset_and_count() -> None:
    """The repeat step routes the fetches it lets through by the step core: each message
    with its clock's offset in its window (a first fetch 1, it counts itself; a revisit
    0) and now = fetched_at; per (crawl, window) every state shard gets the pages the
    repeat shard counted, the shards the messages' keys fall in their messages too."""
    strategy = build_strategy("ieca", budget=10)
    first = FetchEvent(
        "https://a.example/", 5, 200, "f", "a.example", outlinks=("https://b.example/",)
    )
    again = FetchEvent("https://c.example/", 6, 200, "f", "c.example")
    routes = WindowRoutes(strategy, 4)
    routes.add(2_000, 7, "c", FetchKind.FIRST, first)
    routes.add(2_000, 9, "c", FetchKind.REVISIT, again)
    items = {
        shard: (due, position, BATCH_CODER.decode(batch))
        for shard, (due, position, batch) in routes.items()
    }
    assert sorted(items) == [0, 1, 2, 3]  # a page counted: every state shard hears it
    messages = {
        key: message[:5]
        for _, _, (by_url, *_) in items.values()
        for key, kept in by_url.items()
        for message in kept
    }
    assert messages == {
        "https://a.example/": (2_000, 7, 0, 1, 5),
        "https://b.example/": (2_000, 7, 1, 1, 5),
        "https://c.example/": (2_000, 9, 0, 0, 6),
    }
    for shard, (due, position, (by_url, pauses, crawl_id, pages)) in items.items():
        assert (due, position, pauses, crawl_id, pages) == (2_000, 7, {}, "c", 1)
        assert all(state_shard(key, 4) == shard for key in by_url)
    revisit_only = WindowRoutes(strategy, 4)
    revisit_only.add(3_000, 11, "c", FetchKind.REVISIT, again)
    [(shard, (_, _, batch))] = revisit_only.items()  # no page: only the shard with messages
    assert shard == state_shard("https://c.example/", 4) and BATCH_CODER.decode(batch)[3] == 0


def test_the_update_counts_the_pages_before_each_window() -> None:
    """Each state shard of the update keeps the crawl's running count from the counts
    every repeat shard sends it: 3 ms past a window's due it applies the window's
    messages with crawled = the pages counted in the windows before + their offset,
    then adds the window's own counts. A count delivered twice (Prism does now and then)
    counts once, before its window is taken or after."""
    update = _ApplyInEventTime(build_strategy("ieca", budget=10))
    held, pending, records, timer = Cell(), Bag(), Bag(), Timer()
    event = FetchEvent(
        "https://a.example/", 5, 200, "f", "a.example", outlinks=("https://b.example/",)
    )
    routes = WindowRoutes(build_strategy("ieca", budget=10), 1)  # one state shard
    routes.add(2_000, 7, "c", FetchKind.FIRST, event)
    [(_, fetch)] = routes.items()
    for item in (
        held_batch(1_000, 5, ({}, {}, "c", 1)),  # a repeat shard's count: 1 page in 1,000
        fetch,
        held_batch(1_000, 3, ({}, {}, "c", 2)),  # another shard's: 2 pages
        held_batch(1_000, 3, ({}, {}, "c", 2)),  # ... delivered twice
    ):
        update.process((0, window_batch(item)), held, pending, timer)
    assert timer.at == 1_000 + 3_000  # 3 ms past the earliest due
    assert list(update.fire(0, Timestamp(micros=4_000), held, pending, records, timer)) == []
    (_, _, counted), through = held.value[0]
    assert (counted, through) == ({"c": 3}, 1_000)  # counts only: 3 pages through 1,000
    assert timer.at == 5_000 and len(pending.items) == 1
    sets, waiting = len(timer.sets), list(pending.items)
    again = held_batch(1_000, 3, ({}, {}, "c", 2))
    update.process((0, window_batch(again)), held, pending, timer)
    assert pending.items == waiting and len(timer.sets) == sets  # dropped once taken
    out = list(update.fire(0, Timestamp(micros=5_000), held, pending, records, timer))
    assert sorted(u.url for u in out) == ["https://a.example/", "https://b.example/"]
    assert held.value[0][0][2] == {"c": 4} and pending.items == []  # its own page, once


def test_messages_see_the_pages_counted_before_their_window() -> None:
    """`with_crawl_clock` by hand: before(w) per crawl from the windows before w, plus a
    message's offset; a window's own counts only after its messages; messages that read
    no clock (a revisit decision, crawl None) are left as they are."""
    a = ("https://a.example/", [(2_000, 7, 0, 1, 5, ("Fetched",))])
    r = ("https://r.example/", [(2_000, 8, 9, 0, 0, b"entry")])
    held = [
        (1_000, 3, {}, {}, "c", 2),
        (1_000, 5, {}, {}, "c", 1),
        (1_000, 6, {}, {}, "d", 4),  # another crawl counts apart
        (2_000, 7, dict([a]), {}, "c", 1),
        (2_000, 8, dict([r]), {}, None, 0),
        (3_000, 9, {"https://b.example/": [(3_000, 9, 0, 1, 6, ("Link",))]}, {}, "c", 0),
    ]
    counted = {"c": 10}  # through the windows taken before
    out = with_crawl_clock(held, counted)
    assert [(due, at) for due, at, *_ in out] == [(d, p) for d, p, *_ in held]
    assert out[3][2] == {"https://a.example/": [(2_000, 7, 0, 14, 5, ("Fetched",))]}
    assert out[4][2] == dict([r])
    assert out[5][2] == {"https://b.example/": [(3_000, 9, 0, 15, 6, ("Link",))]}
    assert counted == {"c": 14, "d": 4}


@pytest.mark.parametrize(
    ("text", "width"), [("exact", None), ("windowed:1", 1), ("windowed:60000", 60000)]
)
def test_parse_clock(text: str, width: int | None) -> None:
    parsed = parse_clock(text)
    assert (None if parsed is None else parsed.width_ms) == width


@pytest.mark.parametrize("text", ["windowed:0", "windowed:-5", "windowed:x", "wall", ""])
def test_parse_clock_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="clock"):
        parse_clock(text)


class _MemoryFileSystem(FileSystem):
    """A `memtest://` scheme holding files in a dict: any registered scheme reads logs."""

    files: ClassVar[dict[str, bytes]] = {}

    @classmethod
    def scheme(cls) -> str:
        return "memtest"

    def match(self, patterns: list[str], limits: Any = None) -> list[MatchResult]:
        return [
            MatchResult(p, [FileMetadata(p, len(self.files[p]))] if p in self.files else [])
            for p in patterns
        ]

    def open(self, path: str, mime_type: str = "", compression_type: Any = None) -> Any:
        return io.BufferedReader(io.BytesIO(self.files[path]))  # type: ignore[arg-type]

    def join(self, base: str, *paths: str) -> str:
        raise NotImplementedError

    def split(self, path: str) -> tuple[str, str]:
        raise NotImplementedError

    def mkdirs(self, path: str) -> None:
        raise NotImplementedError

    def has_dirs(self) -> bool:
        return False

    def _list(self, dir_or_prefix: str) -> Any:
        raise NotImplementedError

    def create(self, path: str, mime_type: str = "", compression_type: Any = None) -> Any:
        raise NotImplementedError

    def copy(self, source: Any, destination: Any) -> None:
        raise NotImplementedError

    def rename(self, source: Any, destination: Any) -> None:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        return path in self.files

    def size(self, path: str) -> int:
        return len(self.files[path])

    def last_updated(self, path: str) -> float:
        return 0.0

    def metadata(self, path: str) -> FileMetadata:
        return FileMetadata(path, len(self.files[path]))

    def checksum(self, path: str) -> str:
        return str(len(self.files[path]))

    def delete(self, paths: list[str]) -> None:
        raise NotImplementedError


def test_log_reads_through_beam_filesystems(beam_replay_case: Any, tmp_path: Path) -> None:
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=20)  # 20 events + 1 dead letter
    local = list(read_log_items(one_log_file(str(log))))
    _MemoryFileSystem.files["memtest://bucket/events.avro"] = log.read_bytes()
    remote = list(read_log_items(one_log_file("memtest://bucket/events.avro")))
    assert len(local) == 21
    assert remote == local
    with pytest.raises(FileNotFoundError, match="no such log"):
        one_log_file("memtest://bucket/missing.avro")
    with pytest.raises(FileNotFoundError, match="no such log"):
        one_log_file(str(tmp_path / "missing.avro"))


def test_container_log_reads_in_parts(beam_replay_case: Any, tmp_path: Path) -> None:
    """A container is read in `READ_PARTS` parts whose items together are the whole log's;
    JSON lines, and a remote log that cannot be opened when the pipeline is built, in one."""
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log)  # 300 events + 1 dead letter, in 11 blocks
    whole = list(read_log_items(str(log)))
    parts = [list(read_log_items(str(log), part, 4)) for part in range(4)]
    assert all(parts)
    union = sorted((item for part in parts for item in part), key=lambda item: item[0].offset)
    assert union == whole
    assert [position.offset for position, _, _ in whole] == list(range(301))
    assert ReadFetchEventLog(log).parts == READ_PARTS
    jsonl = tmp_path / "events.jsonl"
    event = '{"url":"u","fetched_at":1,"status":200,"fetcher_id":"f","host":"h"}'
    jsonl.write_text(event + "\n" + event + "\n")
    assert ReadFetchEventLog(jsonl).parts == 1
    assert len(list(read_log_items(str(jsonl)))) == 2
    assert list(read_log_items(str(jsonl), 1, 4)) == []
    assert ReadFetchEventLog("nosuch://bucket/events.avro").parts == 1


def test_cli_replay_with_windowed_clock(beam_replay_case: Any, tmp_path: Path) -> None:
    from frontierflow.pipelines.cli import main

    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=10)
    out = tmp_path / "out"
    args = [
        "replay",
        str(log),
        "--runner",
        "beam",
        "--out",
        str(out),
        "--budget",
        str(beam_replay_case.budget),
    ]
    assert main([*args, "--clock", "windowed:5", "--beam-option=--runner=FnApiRunner"]) == 0
    entries, states, _ = beam_replay_case.beam(out)
    assert entries and states
    assert main([*args, "--clock", "windowed:0"]) == 2  # refused at start-up


def test_shard_batch_orders_each_urls_messages_and_due_messages_merges_windows() -> None:
    # (url, (due, position, index, crawled, now_ms, message)) as routing yields them
    a1 = (999, 7, 1, 3, 5, ("Link",))
    a0 = (999, 7, 0, 3, 5, ("Fetched",))
    b0 = (999, 4, 2, 2, 4, ("Link",))
    a2 = (999, 9, 0, 4, 6, ("Link",))
    batch = shard_batch([("a", a1), ("b", b0), ("a", a2), ("a", a0)])
    # due, the first position of the window (4), each URL's messages by (position, index)
    assert batch == (999, 4, {"b": [b0], "a": [a0, a1, a2]})
    assert due_messages([batch]) is batch[2]  # one window: as it is
    later = (1_999, 2, 0, 5, 7, ("Link",))
    merged = due_messages([shard_batch([("a", later)]), batch])  # out of order on purpose
    assert merged == {"a": [a0, a1, a2, later], "b": [b0]}


def test_shard_batch_applies_a_message_delivered_twice_once() -> None:
    """A routed window or a grouped batch delivered twice (Prism re-sends a step's outputs
    now and then): each URL keeps one copy of each (due, position, index); a different
    index of the same position, the same index of another position, or the same position
    and index in another window, is another message."""
    a0 = (999, 7, 0, 3, 5, ("Fetched",))
    a1 = (999, 7, 1, 3, 5, ("Link",))
    b1 = (999, 7, 1, 3, 5, ("Link",))  # same position and index as a1, another URL
    a3 = (999, 8, 1, 4, 6, ("Link",))
    twice = [("a", a0), ("a", a1), ("b", b1), ("a", a3)] * 2
    batch = shard_batch(twice)
    assert batch == (999, 7, {"a": [a0, a1, a3], "b": [b1]})
    later = (1_999, 7, 0, 5, 7, ("Link",))  # same position and index, a later window
    assert due_messages([batch, shard_batch([("a", later)]), batch]) == {
        "a": [a0, a1, a3, later],
        "b": [b1],
    }


def test_a_windows_items_from_every_routing_and_host_shard_apply_as_one_batch() -> None:
    """The update holds each repeat shard's messages and each host shard's pauses of a
    window as items of their own; merged when due, the window's messages are applied under
    the pauses of every host shard, each message once, and a later window's after them,
    with the pages the window counted before them (2: crawled 1 becomes 3)."""
    a0 = (999, 2, 0, 1, 5, ("Fetched",))
    a1 = (999, 6, 3, 1, 6, ("Link",))
    b0 = (999, 6, 1, 1, 6, ("Link",))
    c0 = (1_999, 9, 0, 1, 7, ("Link",))
    [(_, first)] = window_items(999, 6, "c", 1, [("a", a1), ("b", b0)], 1)  # repeat shard 1
    [(_, second)] = window_items(999, 2, "c", 1, [("a", a0)], 1)  # repeat shard 0
    pauses_x = window_batch((999, -1, {"x.test": ["px"]}))  # host shard 0
    pauses_y = window_batch((999, -1, {"y.test": ["py"]}))  # host shard 1
    [(_, later)] = window_items(1_999, 9, "c", 1, [("c", c0)], 1)
    held = sorted(
        [
            (d, p, *BATCH_CODER.decode(batch))
            for d, p, batch in (first, second, pauses_x, pauses_y, later, second)
        ],
        key=lambda item: item[:2],
    )  # in (due, position) order, as the held cell keeps them; `second` delivered twice,
    # taken once (`take_due`)
    merged = one_per_window(with_crawl_clock(each_delivery_once(held), {}))
    c0 = (1_999, 9, 0, 3, 7, ("Link",))
    assert merged == [
        (999, -1, {"a": [a0, a1], "b": [b0]}, {"x.test": ["px"], "y.test": ["py"]}),
        (1_999, 9, {"c": [c0]}, {}),
    ]
    runs = list(pause_runs(merged))  # one run: the later window under the same pauses
    assert [pauses for pauses, _ in runs] == [{"x.test": ["px"], "y.test": ["py"]}]
    assert due_messages(runs[0][1]) == {"a": [a0, a1], "b": [b0], "c": [c0]}


def test_routed_messages_leave_gathered_per_state_shard_in_order() -> None:
    routed = [("u1", "m1"), ("u2", "m2"), ("u1", "m3"), ("u3", "m4")]
    shard = {u: zlib.crc32(u.encode()) % 4 for u in ("u1", "u2", "u3")}
    expected: dict[int, list[tuple[str, str]]] = {}
    for url, message in routed:
        expected.setdefault(shard[url], []).append((url, message))
    assert by_state_shard(routed, 4) == expected
    assert by_state_shard(routed, 1) == {0: routed}
