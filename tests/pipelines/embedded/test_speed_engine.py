"""The crawl-speed controller inside the embedded engine: the replay's ScalingDecisions equal
the operator's reference run and Beam's on the same recorded log, survive a crash between
flush and commit, and reach the fetcher-control topic on the live path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from frontierflow.pipelines.embedded.live import LiveOptions, run_live
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.speed.per_fetcher import decisions_from_log, observe
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.codecs import AvroCodec
from frontierflow.schemas.container import write_container
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import FetchEvent, ScalingDecision

SETTINGS = ControllerSettings(window_ms=10_000, slide_ms=5_000, allowed_lateness_ms=3_000)


def _log(tmp_path: Path, events: list[FetchEvent]) -> tuple[list[FetchEvent], Path]:
    path = tmp_path / "events.avro"
    write_container(path, "FetchEvent", [e.to_avro() for e in events])
    return events, path


def _decisions(path: Path) -> list[ScalingDecision]:
    return [
        ScalingDecision(**json_to_record(line, "ScalingDecision"))
        for line in path.read_text().splitlines()
    ]


def _replay(log: Path, work: Path, **kw: Any) -> list[ScalingDecision]:
    replay_log(
        log,
        strategy_name="bfs",
        state_dir=work / "state",
        out=work / "out.jsonl",
        step_size=13,
        speed=SETTINGS,
        **kw,
    )
    return _decisions(work / "out.jsonl.decisions.jsonl")


def test_replay_decisions_equal_the_reference_and_beam(
    tmp_path: Path, recorded_speed_events: list[FetchEvent]
) -> None:
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    from frontierflow.pipelines.beam.speed import read_beam_decisions, run_beam_speed

    events, log = _log(tmp_path, recorded_speed_events)
    got = _replay(log, tmp_path / "replay")
    expected = decisions_from_log(events, SETTINGS)
    assert len(got) > 10
    assert got == expected
    run_beam_speed(events, SETTINGS, str(tmp_path / "beam"), runner=FnApiRunner())
    key = lambda d: (d.fetcher_id, d.window_end)  # noqa: E731
    assert sorted(got, key=key) == read_beam_decisions(str(tmp_path / "beam"))


def test_a_crash_between_flush_and_commit_repeats_nothing(
    tmp_path: Path, recorded_speed_events: list[FetchEvent]
) -> None:
    events, log = _log(tmp_path, recorded_speed_events)
    expected = decisions_from_log(events, SETTINGS)
    calls = 0

    def crash(phase: str) -> None:
        nonlocal calls
        if phase == "flushed":
            calls += 1
            if calls == 4:
                raise RuntimeError("simulated crash after the flush, before the commit")

    with pytest.raises(RuntimeError, match="simulated crash"):
        _replay(log, tmp_path / "w", before_commit=crash)
    # the decisions file now holds a step that was flushed but not committed; the rerun cuts
    # it back to the committed position and redoes the step
    assert _replay(log, tmp_path / "w") == expected


def test_a_replay_resumed_on_a_longer_log_decides_no_window_twice(
    tmp_path: Path, recorded_speed_events: list[FetchEvent]
) -> None:
    """The end of a log closes every open window; the same state resumed on that log with
    more events after it (the first of them back in an already closed window) gives each
    window one decision: the closed ones are not opened again."""
    events = recorded_speed_events
    half = len(events) // 2
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, log = _log(tmp_path / "a", events[:half])
    got_first = _replay(log, tmp_path / "w")
    late = events[half - 1]  # fetched in a window the end of the first log closed
    longer = [*first, late, *events[half:]]
    _, longer_log = _log(tmp_path / "b", longer)
    got = _replay(longer_log, tmp_path / "w")  # the decisions file keeps the first run's
    assert got[: len(got_first)] == got_first
    windows = [(d.fetcher_id, d.window_start) for d in got]
    assert len(windows) == len(set(windows)), "a window was decided twice"


@pytest.mark.kafka
def test_live_decisions_reach_fetcher_control(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, recorded_speed_events: list[FetchEvent]
) -> None:
    events, _ = _log(tmp_path, recorded_speed_events)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    topics = settings.topics
    kafka_client.produce(settings, kafka_client.avro(e.to_avro() for e in events))
    options = LiveOptions(step_size=17, exit_when_idle=True, speed=SETTINGS)
    stats = run_live(settings, build_strategy("bfs", budget=1000), tmp_path / "live", options)

    # a live job never sees the end of its input, so the windows still open stay open
    states: dict[str, Any] = {}
    expected: list[ScalingDecision] = []
    for event in events:
        states[event.fetcher_id], decided = observe(states.get(event.fetcher_id), event, SETTINGS)
        expected += decided
    assert stats.decisions == len(expected) > 10

    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False)
    partitions = [TopicPartition(topics.fetcher_control, p) for p in (0,)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    decision_codec = AvroCodec.for_name("ScalingDecision")
    got: list[ScalingDecision] = []
    keys: list[bytes] = []
    while len(got) < len(expected):
        polled = consumer.poll(timeout_ms=10_000)
        assert polled, f"fetcher-control ended after {len(got)} of {len(expected)} decisions"
        for records in polled.values():
            for r in records:
                got.append(ScalingDecision(**decision_codec.decode(r.value)))
                keys.append(r.key)
    consumer.close()
    assert got == expected
    assert keys == [d.fetcher_id.encode() for d in expected]
    assert json.dumps(got[0].to_avro())  # plain values, printable
