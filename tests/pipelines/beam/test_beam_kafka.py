"""Kafka in → Beam on Prism → Kafka out, on the real broker: the frontier a fetcher rebuilds
from the compacted topic equals the one `frontierflow replay` gives for the same events, for
the exact-clock pipeline and for the unbounded form (event time = `fetched_at`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lafc_recording import decisions_per_fetcher

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.kafka import (
    LATE_EVENT,
    run_beam_kafka,
    run_beam_kafka_stream,
)
from frontierflow.pipelines.beam.kafka_records import FUTURE_EVENT
from frontierflow.pipelines.speed.per_fetcher import counts_for_speed, decisions_in_order
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.schemas.codecs import AvroCodec, record_from_dict
from frontierflow.schemas.records import FetchEvent

pytestmark = [pytest.mark.kafka, pytest.mark.beam_runner]

BUDGET = 1000
STEP = 25  # the steps of the replay that the Beam runs must equal

PRISM_ACCOUNTING = "nothing in progress and no refreshes with non zero pending elements"
T = TypeVar("T")


def _once_more_on_prism_accounting(run: Callable[[], T]) -> T:
    """`run()`, and once more (on topics of its own) if Prism failed the job on its own
    element accounting: every stage's watermark at +inf, nothing pending or held, yet a
    count of pending elements above 0 (Prism 2.75, now and then on the unbounded form,
    whose outputs it sometimes delivers twice: `docs/RESULTS.md`). Any other failure, and
    a second one of these, fail the test."""
    try:
        return run()
    except RuntimeError as err:
        if PRISM_ACCOUNTING not in str(err):
            raise
        warnings.warn(
            f"Prism's element accounting failed the job; run again: {err!s:.200}", stacklevel=2
        )
    return run()


def test_kafka_through_prism_equals_replay(
    kafka_broker: Any, kafka_client: Any, prism_binary: Path, tmp_path: Path
) -> None:
    records = kafka_client.events(300, seed=41)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(
        settings, [*kafka_client.avro(records), b"garbage", b'{"url": "ftp://x/"}']
    )
    run_beam_kafka(
        settings,
        strategy_name="ieca",
        budget=BUDGET,
        beam_args=[
            "--runner=PrismRunner",
            f"--prism_location={prism_binary}",
            "--environment_type=LOOPBACK",
        ],
    )
    expected, _ = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    live = kafka_client.latest_frontier(settings)
    assert len(live) > 200
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    dead = [
        AvroCodec.for_name("DeadLetter").decode(v)
        for _, v in kafka_client.read_topic(settings, settings.topics.dead_letter)
        if v is not None
    ]
    assert sorted(d["raw"] for d in dead) == [b"garbage", b'{"url": "ftp://x/"}']


def _prism(prism_binary: Path) -> list[str]:
    return [
        "--runner=PrismRunner",
        f"--prism_location={prism_binary}",
        "--environment_type=LOOPBACK",
    ]


def _latest_values(kafka_client: Any, settings: Any, topic: str) -> dict[bytes, bytes]:
    """A compacted topic as its reader sees it: latest value per key, tombstones remove."""
    latest: dict[bytes, bytes] = {}
    for key, value in kafka_client.read_topic(settings, topic):
        assert key is not None
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = value
    return latest


@pytest.mark.slow
def test_kafka_stream_through_prism_equals_replay(
    kafka_broker: Any, kafka_client: Any, prism_binary: Path, tmp_path: Path
) -> None:
    """The unbounded form, W = 1 ms: `fetched_at` = base + i, so one page per clock window
    and the windowed clock is exact (`beam_stream` docstring); read bounded to the end
    offsets. Compared: the latest frontier entry per URL on the compacted topic (priority,
    via, emitted_at, echo, host, cycle) and every URL's latest state on the state topic
    (bytes), against `frontierflow replay` of the events Beam accepted; and the
    ScalingDecisions on fetcher-control (speed windows of 10 ms) against the live engine's
    fold over the same events (`decisions_in_order`)."""
    records = kafka_client.events(120, seed=43)
    base = records[0]["fetched_at"]
    late = {**records[7], "url": "https://late.example.net/x", "fetched_at": base - 5000}
    # fetched in 2096 says the event; Kafka stamps it now: it must not move the watermark
    future = {**records[9], "url": "https://future.example.net/y", "fetched_at": 4 * 10**12}
    avro = kafka_client.avro
    values = [*avro(records[:100]), *avro([late, future]), b"garbage", *avro(records[100:])]

    def run() -> tuple[Any, str]:
        settings = kafka_client.settings(kafka_broker.bootstrap)  # topics of its own
        state_topic = settings.topics.frontier + "-state"
        kafka_client.produce(settings, values)
        run_beam_kafka_stream(
            settings,
            strategy_name="ieca",
            budget=BUDGET,
            windows=ClockWindows(1),
            beam_args=_prism(prism_binary),
            lateness_ms=0,
            state_topic=state_topic,
            speed=SPEED,
        )
        return settings, state_topic

    settings, state_topic = _once_more_on_prism_accounting(run)
    expected, expected_state = kafka_client.replayed(
        tmp_path, records, budget=BUDGET, step=STEP
    )  # the late event is dead
    live = kafka_client.latest_frontier(settings)
    assert len(live) > 150
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    states = _latest_values(kafka_client, settings, state_topic)
    assert len(states) > 500
    assert states == expected_state["ieca"]
    dead = sorted(
        (
            AvroCodec.for_name("DeadLetter").decode(v)
            for _, v in kafka_client.read_topic(settings, settings.topics.dead_letter)
            if v is not None
        ),
        key=lambda d: d["error_class"],
    )
    assert [d["error_class"] for d in dead] == ["CodecError", FUTURE_EVENT, LATE_EVENT]
    assert dead[0]["raw"] == b"garbage"
    assert dead[1]["message"].startswith(f"fetched_at {4 * 10**12} is ")
    # by hand: the watermark is the largest fetched_at read before it, base + 99 (lateness
    # 0), and the late event is at base − 5000: 5099 ms behind
    assert f"{base - 5000} is 5099 ms behind the watermark {base + 99}" in dead[2]["message"]
    _assert_decisions_as_the_live_engine(settings, records)


SPEED = settings_for("hypothesis", window_ms=10)


def _assert_decisions_as_the_live_engine(settings: Any, records: list[dict[str, Any]]) -> None:
    """Each fetcher's ScalingDecisions on fetcher-control equal the live engine's over
    `records`: 120 events a millisecond apart over three fetchers, 40 each, so 11 windows
    of 10 ms close per fetcher (the twelfth is still open)."""
    events = [record_from_dict(FetchEvent, r) for r in records]
    expected = decisions_in_order(filter(counts_for_speed, events), SPEED)
    assert len(expected) == 3 * 11
    got = decisions_per_fetcher(settings)
    for fetcher in ("f0", "f1", "f2"):
        assert got[fetcher] == [d for d in expected if d.fetcher_id == fetcher]


def test_cli_run_beam_exact_clock_on_the_local_runner(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    """`frontierflow run --runner beam`: the exact clock reads fetch-events to its current
    end and stops; what lands on the frontier topic equals the replay of the same events."""
    from frontierflow.pipelines.cli import main

    records = kafka_client.events(120, seed=47)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(settings, [*kafka_client.avro(records), b"garbage"])
    t = settings.topics
    topics = [
        *("--topic-fetch-events", t.fetch_events, "--topic-frontier", t.frontier),
        *("--topic-fetcher-control", t.fetcher_control, "--topic-dead-letter", t.dead_letter),
    ]
    argv = ["run", "--runner", "beam", "--bootstrap-servers", kafka_broker.bootstrap, *topics]
    assert main([*argv, "--budget", str(BUDGET), "--beam-option=--runner=FnApiRunner"]) == 0
    expected, _ = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    live = kafka_client.latest_frontier(settings)
    assert len(live) > 80
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    dead = [v for _, v in kafka_client.read_topic(settings, t.dead_letter) if v is not None]
    assert [AvroCodec.for_name("DeadLetter").decode(v)["raw"] for v in dead] == [b"garbage"]


def test_cli_run_beam_stream_schedules_revisits_as_the_replay(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    """`frontierflow run --runner beam --clock windowed:W --revisit fixed:20m` on a crawl
    of the news site (the fleet tests' news-site fetcher): the frontier a fetcher rebuilds
    from the compacted topic equals `frontierflow replay --revisit fixed:20m` of the same
    events, each page's revisit entry and its `not_before` included."""
    from news_recording import crawl_news, latest_entries

    from frontierflow.pipelines.cli import main
    from frontierflow.schemas.container import write_container

    crawl = crawl_news(tmp_path, "fixed:20m", budget=100, days=0.05)
    records = [e.to_avro() for e in crawl.events]
    log = tmp_path / "events.avro"
    write_container(log, "FetchEvent", records)
    revisit = ["--strategy", "bfs", "--budget", "100", "--revisit", "fixed:20m"]
    out = tmp_path / "replay.jsonl"
    assert (
        main(["replay", str(log), *revisit, "--state-dir", str(tmp_path / "s"), "--out", str(out)])
        == 0
    )
    expected = latest_entries(out)

    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(settings, kafka_client.avro(records))
    t = settings.topics
    topics = [
        *("--topic-fetch-events", t.fetch_events, "--topic-frontier", t.frontier),
        *("--topic-fetcher-control", t.fetcher_control, "--topic-dead-letter", t.dead_letter),
    ]
    argv = ["run", "--runner", "beam", "--bootstrap-servers", kafka_broker.bootstrap, *topics]
    stream = ["--clock", "windowed:60000", "--exit-when-idle", "--speed-controller", "none"]
    assert main([*argv, *revisit, *stream, "--beam-option=--runner=FnApiRunner"]) == 0
    live = kafka_client.latest_frontier(settings)
    # the replay's file holds upserts only: a story fetched after a revisit's links wrote
    # its entry keeps it there; on the compacted topic it is removed
    removed = expected.keys() - live.keys()
    stories = {e.url for e in crawl.events if e.published_at is not None}
    assert removed <= stories
    due = {e.url: e.fetched_at + 20 * 60_000 for e in crawl.events}  # the last download's
    assert {u: e["not_before"] for u, e in live.items() if u in due} == due
    assert {u: (e["priority"], e["not_before"], e["echo"]) for u, e in live.items()} == {
        u: (e["priority"], e["not_before"], e["echo"])
        for u, e in expected.items()
        if u not in removed
    }
