"""The operator's page's bounded summary, on hand-made steps with a hand-driven clock; and
on a real replay, where the page's totals must equal the engine's own counters."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.embedded.engine import EngineStats
from frontierflow.pipelines.embedded.observer import StepReport
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.pipelines.ui.summary import LiveSummary, SummarySettings
from frontierflow.pipelines.ui.tracking import QueuedByHost, SecondSeries, TopEntries
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import (
    REPLY_ECHO,
    DeadLetter,
    FrontierEntry,
    Removal,
    ScalingDecision,
)
from frontierflow.state.hosts import HostState
from frontierflow.state.relevance import Judge, Topic, event_terms, similarity


def entry(url: str, host: str, priority: float, **kw: Any) -> FrontierEntry:
    fields: dict[str, Any] = {
        "strategy": "ieca",
        "crawl_id": "c",
        "cycle": 0,
        "via": None,
        "emitted_at": 0,
        "echo": {},
    }
    return FrontierEntry(url=url, host=host, priority=priority, **(fields | kw))


def decision(fetcher: str, end: int, e_cs: float = 0.5) -> ScalingDecision:
    return ScalingDecision(
        fetcher_id=fetcher,
        window_start=end - 10,
        window_end=end,
        pages=4,
        crawl_speed=400.0,
        speed_mean=390.0,
        speed_stddev=5.0,
        e_cs=e_cs,
        e_cs_sign=1,
        threads_before=4,
        threads_after=3,
        learning=True,
        reason="speed dropped",
    )


def letter(reason: str, raw: bytes, offset: int) -> DeadLetter:
    return DeadLetter("fetch-events", 0, offset, reason, f"bad {offset}", raw, 0)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_second_series_sums_per_second_and_forgets_past_the_window() -> None:
    series = SecondSeries(3)
    series.add(10, 2)
    series.add(10, 1)
    series.add(11, 5)
    assert series.last(12) == [3, 5, 0]
    series.add(13, 7)  # takes second 10's slot
    assert series.last(13) == [5, 0, 7]
    assert series.last_known(13) == [5, None, 7]
    series.set(13, 1)
    series.peak(13, 0.5)
    assert series.last(13)[-1] == 1


def test_top_entries_keep_a_bounded_set_of_the_highest() -> None:
    top = TopEntries(1)  # keeps 8 candidates, prunes past 16
    for p in range(17):
        top.put(f"u{p}", entry(f"u{p}", "h", float(p)))
    assert sorted(e.priority for e in top.candidates.values()) == [9.0 + i for i in range(8)]
    assert top.floor == 9.0
    top.put("low", entry("low", "h", 5.0))  # below the floor, no room: not kept
    assert "low" not in top.candidates
    top.put("u16", entry("u16", "h", 1.0))  # an update of a kept key is always taken
    assert [e.url for e in top.top()] == ["u15"]
    top.drop("u15")
    assert [e.url for e in top.top()] == ["u14"]


def test_host_queues_count_keys_until_their_url_is_fetched() -> None:
    queues = QueuedByHost(cap=3)
    queues.queued("a", "a", "h1")
    queues.queued("b", "b", "h1")
    queues.queued("a", "a", "h1")  # an update: still one
    queues.queued(("c", "p"), "c", "h2")  # a reply request, keyed by (url, parent)
    assert (queues.size(), queues.full) == (3, False)
    queues.queued("d", "d", "h2")  # over the cap: not counted, and said so
    assert (queues.size(), queues.full) == (3, True)
    assert queues.top(5) == [("h1", 2), ("h2", 1)]
    queues.gone("a")
    queues.gone("c")
    queues.gone("never-queued")
    assert queues.top(5) == [("h1", 1)]
    assert queues.size() == 1


def test_summary_of_two_steps_by_hand() -> None:
    clock = Clock(1000.2)
    settings = SummarySettings(window_s=4, harvest_bucket_s=2, fetchers=2, dead_samples=2)
    summary = LiveSummary(
        command="run", strategy="lafc", judges_pages=True, settings=settings, clock=clock
    )
    reply = entry("https://b/2", "b", 3.0, via="https://a/", echo={REPLY_ECHO: "1"})
    step1 = StepReport(
        changes=(entry("https://a/1", "a", 1.0), entry("https://a/2", "a", 2.0), reply),
        dead_letters=(),
        decisions=(decision("f1", 10), decision("f2", 10)),
        # the judge's 0.75 with its tolerance: 0.75 - 1e-12 counts as relevant
        similarities=(0.9, 0.75 - 1e-12, 0.5),
        stats=EngineStats(events=3, entries=3, steps=1),
        seconds=0.020,
    )
    summary.step_committed(step1)
    clock.now = 1001.7
    stats2 = EngineStats(
        events=4, duplicates=1, entries=3, removals=1, dead_letters=3, decisions=3, steps=2
    )
    stats2.dead_reasons = {"CodecError": 3}
    step2 = StepReport(
        changes=(Removal("https://a/2"), Removal("https://b/2")),
        dead_letters=tuple(letter("CodecError", b"\xff<b>x" * i, i) for i in range(3)),
        decisions=(decision("f3", 20, e_cs=math.nan), decision("f2", 20)),
        similarities=(0.2,),
        stats=stats2,
        seconds=0.005,
    )
    summary.step_committed(step2)
    summary.input_lag(42)
    snap = summary.snapshot()
    json.dumps(snap, allow_nan=False)  # plain JSON, NaN shown as missing
    assert snap["totals"] == {
        "events": 4,
        "duplicates": 1,
        "entries": 3,
        "removals": 1,
        "dead_letters": 3,
        "decisions": 3,
        "steps": 2,
    }
    # seconds 998..1001: step 1 in second 1000, step 2 (the differences) in 1001
    assert snap["rates"]["events"] == [0, 0, 3, 1]
    assert snap["rates"]["entries"] == [0, 0, 3, 0]
    assert snap["rates"]["removals"] == [0, 0, 0, 1]
    assert snap["rates"]["dead_letters"] == [0, 0, 0, 3]
    assert snap["step"]["max_ms"] == [None, None, pytest.approx(20.0), pytest.approx(5.0)]
    assert snap["lag"] == {"last": 42, "per_second": [None, None, None, 42]}
    frontier = snap["frontier"]
    assert frontier["queued"] == 1  # a/1 is left; a/2 and the reply request for b/2 went
    assert frontier["top_hosts"] == [{"host": "a", "queued": 1}]
    assert [e["url"] for e in frontier["top_entries"]] == ["https://a/1"]
    # 2 of the 4 judged pages were relevant, all in the bucket of seconds 1000-1001
    assert snap["harvest"] == {
        "threshold": 0.75,
        "judged": 4,
        "relevant": 2,
        "bucket_s": 2,
        "share": [None, 0.5],
    }
    # two fetchers kept: f1 was heard from least recently and went
    fetchers = {f["fetcher_id"]: f["decisions"] for f in snap["fetchers"]}
    assert sorted(fetchers) == ["f2", "f3"]
    assert [d["window_end"] for d in fetchers["f2"]] == [10, 20]
    assert fetchers["f3"][0]["e_cs"] is None
    (dead,) = snap["dead_letters"]
    assert (dead["reason"], dead["count"]) == ("CodecError", 3)
    # the latest two, newest first, raw bytes as text with the undecodable byte replaced
    assert [s["offset"] for s in dead["samples"]] == [2, 1]
    assert dead["samples"][0]["raw"] == "\ufffd<b>x\ufffd<b>x"
    assert dead["samples"][0]["raw_bytes"] == 10


def test_a_strategy_that_judges_no_page_has_no_harvest() -> None:
    summary = LiveSummary(command="replay", strategy="ieca", judges_pages=False)
    assert summary.snapshot()["harvest"] is None
    assert summary.snapshot()["totals"]["events"] == 0


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        SummarySettings(top_entries=0)
    with pytest.raises(ValueError, match="divide"):
        SummarySettings(window_s=300, harvest_bucket_s=7)


def test_replay_feeds_the_summary_what_the_engine_counted(
    tmp_path: Path, fetch_events: Any
) -> None:
    """LAFC over a small log: the page's totals are the engine's counters, its harvest
    counts the first fetches whose similarity reaches the judge's threshold."""
    records = fetch_events(
        120, seed=4, pages=60, url="https://h{host}.example.org/{page}", hosts=5, max_outlinks=6
    )
    topic = Topic.parse("socket tcp port")
    words = ["socket", "tcp", "port", "kernel", "page"]
    for i, record in enumerate(records):
        record["terms"] = {words[i % 5]: 2, words[(i + 1) % 5]: 1}
    log = tmp_path / "events.avro"
    write_container(log, "FetchEvent", records)
    strategy = Lafc(topic, LafcSettings(control_threshold=0.3))
    summary = LiveSummary(command="replay", strategy="lafc", judges_pages=True)
    stats = replay_log(
        log,
        strategy_name="lafc",
        state_dir=tmp_path / "state",
        out=tmp_path / "out.jsonl",
        step_size=16,
        strategy=strategy,
        speed=settings_for("hypothesis", window_ms=10),
        observer=summary,
    )
    snap = summary.snapshot()
    assert snap["totals"]["events"] == stats.events > 0
    assert snap["totals"]["entries"] == stats.entries
    assert snap["totals"]["removals"] == stats.removals
    assert snap["totals"]["decisions"] == stats.decisions > 0
    seen: set[str] = set()
    relevant = 0
    for record in records:
        if record["url"] in seen:
            continue
        seen.add(record["url"])
        sim = similarity(topic, event_terms(record["terms"], None))
        relevant += sim >= Judge().threshold - Judge().tolerance
    assert snap["harvest"]["judged"] == stats.events
    assert snap["harvest"]["relevant"] == relevant > 0


def test_paused_hosts_shown_until_their_pause_ends() -> None:
    clock = Clock(1000.0)
    summary = LiveSummary(command="run", strategy="bfs", judges_pages=False, clock=clock)
    busy = HostState(paused_until=1_015_000, level=1, reason="429", pauses=1)
    down = HostState(paused_until=1_060_000, level=2, reason="503", pauses=2)
    fine = HostState(last_fetch_at=999_000)
    summary.step_committed(
        StepReport(
            changes=(),
            dead_letters=(),
            decisions=(),
            similarities=(),
            stats=EngineStats(),
            seconds=0.0,
            hosts={"c\x00busy.test": busy, "c\x00down.test": down, "c\x00fine.test": fine},
        )
    )
    snap = summary.snapshot()
    assert [(p["host"], p["reason"], p["until"], p["level"]) for p in snap["paused_hosts"]] == [
        ("down.test", "503", 1_060_000, 2),  # the longest pause first
        ("busy.test", "429", 1_015_000, 1),
    ]
    assert {p["crawl_id"] for p in snap["paused_hosts"]} == {"c"}
    clock.now = 1015.0  # busy's pause is over
    assert [p["host"] for p in summary.snapshot()["paused_hosts"]] == ["down.test"]
