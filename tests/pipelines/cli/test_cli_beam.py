"""`frontierflow run --runner beam` and `replay --runner beam`: which pipeline function is
called with what, without starting a runner (the run functions are replaced by recorders);
options that cannot apply are refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.replay import Seeds
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.pipelines.strategies.ieca import IecaStrategy
from frontierflow.state.hosts import DEFAULT_POLICY

Calls = list[tuple[str, tuple[Any, ...], dict[str, Any]]]


def _recorder(calls: Calls, name: str) -> Any:
    def record(*args: Any, **kwargs: Any) -> None:
        calls.append((name, args, kwargs))

    return record


@pytest.fixture
def kafka_calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Calls to the Beam Kafka pipelines and to topic creation, none of them run."""
    calls: Calls = []
    for module, name in (
        ("frontierflow.pipelines.beam.kafka", "run_beam_kafka"),
        ("frontierflow.pipelines.beam.kafka", "run_beam_kafka_stream"),
        ("frontierflow.connectors.kafka", "ensure_topics"),
    ):
        monkeypatch.setattr(f"{module}.{name}", _recorder(calls, name))
    return calls


RUN = ["run", "--runner", "beam", "--bootstrap-servers", "127.0.0.1:9", "--budget", "400"]


def test_run_exact_clock_reads_to_the_current_end(kafka_calls: Calls) -> None:
    code = main([*RUN, "--topic-frontier", "fr", "--beam-option=--runner=FlinkRunner"])
    assert code == 0
    assert [c[0] for c in kafka_calls] == ["ensure_topics", "run_beam_kafka"]
    (settings,), kw = kafka_calls[1][1], kafka_calls[1][2]
    assert settings.bootstrap_servers == "127.0.0.1:9"
    assert (settings.topics.fetch_events, settings.topics.frontier) == ("fetch-events", "fr")
    assert kafka_calls[0][1] == (settings,)
    assert isinstance(kw.pop("strategy"), IecaStrategy)
    assert kw.pop("hosts") == DEFAULT_POLICY  # the host rule's options, as the fetchers'
    assert kw.pop("revisit") is None  # --revisit none, the default
    assert kw == {
        "strategy_name": "ieca",
        "budget": 400,
        "beam_args": ["--runner=FlinkRunner"],
        "until_current_end": True,
    }


@pytest.mark.parametrize(("idle", "until_end"), [([], False), (["--exit-when-idle"], True)])
def test_run_windowed_clock_reads_on(kafka_calls: Calls, idle: list[str], until_end: bool) -> None:
    extra = ["--allowed-lateness-ms", "250", "--topic-state", "st", "--beam-option=--streaming"]
    assert main([*RUN, "--clock", "windowed:5000", *extra, *idle]) == 0
    assert [c[0] for c in kafka_calls] == ["ensure_topics", "run_beam_kafka_stream"]
    kw = kafka_calls[1][2]
    assert isinstance(kw.pop("strategy"), IecaStrategy)
    assert kw.pop("hosts") == DEFAULT_POLICY  # the host rule's options, as the fetchers'
    assert kw.pop("revisit") is None  # --revisit none, the default
    assert kw.pop("speed") == settings_for("hypothesis")  # the live engine's default
    assert kw == {
        "strategy_name": "ieca",
        "budget": 400,
        "windows": ClockWindows(5000),
        "beam_args": ["--streaming"],
        "until_current_end": until_end,
        "lateness_ms": 250,
        "state_topic": "st",
        "kafka_io": None,
    }


@pytest.mark.parametrize(
    ("speed", "expected"),
    [
        (["--speed-controller", "aimd", "--speed-window-ms", "2000"], "aimd"),
        (["--speed-controller", "none"], None),
    ],
)
def test_run_windowed_clock_runs_the_speed_controller_named(
    kafka_calls: Calls, speed: list[str], expected: str | None
) -> None:
    """The windowed form sends ScalingDecisions as the live engine does, with the same
    options; `none` sends none."""
    assert main([*RUN, "--clock", "windowed:1000", *speed]) == 0
    want = None if expected is None else settings_for(expected, window_ms=2000)
    assert kafka_calls[1][2]["speed"] == want


def test_run_windowed_clock_through_kafka_io(kafka_calls: Calls) -> None:
    argv = [*RUN, "--clock", "windowed:1000", "--kafka-io", "/x/expansion.jar"]
    assert main(argv) == 0
    kw = kafka_calls[1][2]
    assert (kw["kafka_io"], kw["until_current_end"]) == ("/x/expansion.jar", False)


@pytest.mark.parametrize(
    "argv",
    [
        [*RUN, "--speed-controller", "aimd"],  # the exact clock runs no speed controller
        [*RUN, "--clock", "windowed:5", "--speed-controller", "fixed-x"],
        [*RUN, "--allowed-lateness-ms", "5"],  # only the windowed form has lateness
        [*RUN, "--topic-state", "st"],  # ... and a state topic
        [*RUN, "--kafka-io", "/x/e.jar"],  # ... and the Java source
        ["run", "--bootstrap-servers", "127.0.0.1:9", "--state-dir", "s", "--kafka-io", "e"],
        [*RUN, "--clock", "windowed:5", "--allowed-lateness-ms", "-1"],
        [*RUN, "--clock", "windowed:0"],
        [*RUN, "--clock", "hourly"],
        [*RUN, "--strategy", "pagerank"],  # a global recomputation: embedded only
        [*RUN, "--ui-port", "0"],  # the operator's page watches the embedded engine
        ["run", "--bootstrap-servers", "127.0.0.1:9", "--state-dir", "s", "--clock", "windowed:5"],
        ["run", "--bootstrap-servers", "127.0.0.1:9", "--state-dir", "s", "--beam-option=-x"],
        ["run", "--bootstrap-servers", "127.0.0.1:9"],  # the embedded engine needs --state-dir
    ],
)
def test_run_refuses_options_that_cannot_apply(kafka_calls: Calls, argv: list[str]) -> None:
    assert main(argv) == 2
    assert kafka_calls == []  # refused before a topic is made or a pipeline built


def test_run_beam_with_speed_controller_none_runs(kafka_calls: Calls) -> None:
    assert main([*RUN, "--speed-controller", "none"]) == 0
    assert [c[0] for c in kafka_calls] == ["ensure_topics", "run_beam_kafka"]


def _event(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "url": f"https://a.example/{i}",
        "fetched_at": 1_700_000_000_000 + i,
        "status": 200,
        "fetcher_id": "f1",
        "host": "a.example",
        **fields,
    }


@pytest.fixture
def replay_calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Calls to the Beam replay pipelines; the speed one takes its events as a list."""
    calls: Calls = []
    monkeypatch.setattr(
        "frontierflow.pipelines.beam.replay.run_beam_replay", _recorder(calls, "replay")
    )
    monkeypatch.setattr(
        "frontierflow.pipelines.beam.stream_replay.run_beam_stream_replay",
        _recorder(calls, "stream"),
    )

    def speed(events: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(("speed", (list(events), *args), kwargs))

    monkeypatch.setattr("frontierflow.pipelines.beam.speed.run_beam_speed", speed)
    return calls


def _jsonl_log(tmp_path: Path) -> Path:
    """Five lines: two the speed windows count, one repeat answer (208, not a fetch), one
    invalid (ftp URL), one undecodable."""
    lines = [
        json.dumps(_event(0)),
        json.dumps(_event(1, status=208)),
        json.dumps(_event(2, url="ftp://a.example/2")),
        "{not json",
        json.dumps(_event(4, fetcher_id="f2", status=503)),
    ]
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_replay_beam_runs_the_speed_form_on_the_events_the_engine_counts(
    tmp_path: Path, replay_calls: Calls
) -> None:
    log = _jsonl_log(tmp_path)
    out = tmp_path / "out"
    argv = ["replay", str(log), "--runner", "beam", "--out", str(out), "--budget", "50"]
    speed = ["--speed-controller", "aimd", "--speed-window-ms", "2000"]
    assert main([*argv, *speed, "--beam-option=--runner=FnApiRunner"]) == 0
    assert [c[0] for c in replay_calls] == ["replay", "speed"]
    kwargs = dict(replay_calls[0][2])
    assert isinstance(kwargs.pop("strategy"), IecaStrategy)  # built from the options
    assert kwargs.pop("hosts") == DEFAULT_POLICY
    assert kwargs.pop("seeds") == Seeds((), "default", 0)  # no --seed-url
    assert kwargs.pop("revisit") is None  # no --revisit
    assert kwargs == {
        "strategy_name": "ieca",
        "out_prefix": str(out),
        "budget": 50,
        "seed": 0,
        "beam_args": ["--runner=FnApiRunner"],
        "fill_echo": False,  # a log, not a WARC, and no --echo-from-state
    }
    (events, settings, prefix), kw = replay_calls[1][1], replay_calls[1][2]
    assert [(e.url, e.fetcher_id, e.status) for e in events] == [
        ("https://a.example/0", "f1", 200),
        ("https://a.example/4", "f2", 503),
    ]
    assert settings == settings_for("aimd", window_ms=2000)
    assert prefix == f"{out}-speed"
    assert kw == {"beam_args": ["--runner=FnApiRunner"]}


def test_replay_beam_windowed_clock_then_speed(tmp_path: Path, replay_calls: Calls) -> None:
    log = _jsonl_log(tmp_path)
    argv = ["replay", str(log), "--runner", "beam", "--out", str(tmp_path / "o")]
    assert main([*argv, "--clock", "windowed:7"]) == 0
    assert [c[0] for c in replay_calls] == ["stream", "speed"]
    assert replay_calls[0][2]["windows"] == ClockWindows(7)
    assert replay_calls[1][1][1] == settings_for("hypothesis", window_ms=10_000)


def test_replay_beam_without_speed_controller(tmp_path: Path, replay_calls: Calls) -> None:
    log = _jsonl_log(tmp_path)
    argv = ["replay", str(log), "--runner", "beam", "--out", str(tmp_path / "o")]
    assert main([*argv, "--speed-controller", "none"]) == 0
    assert [c[0] for c in replay_calls] == ["replay"]


def test_replay_beam_refuses_a_bad_controller_before_running(
    tmp_path: Path, replay_calls: Calls
) -> None:
    log = _jsonl_log(tmp_path)
    argv = ["replay", str(log), "--runner", "beam", "--out", str(tmp_path / "o")]
    assert main([*argv, "--speed-controller", "fixed-x"]) == 2
    assert replay_calls == []
