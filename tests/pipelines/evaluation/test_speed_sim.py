"""The simulated fetcher on bandwidth traces, the evaluation's metrics, a reduced run of
`frontierflow simulate speed` on the real traces, and Beam = embedded on a recorded log."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.speed import make_controller, recovery_times
from frontierflow.pipelines.evaluation.speedsim import (
    SimSettings,
    TraceError,
    read_trace,
    simulate_fetcher,
)
from frontierflow.pipelines.speed.controllers import initial_controller
from frontierflow.pipelines.speed.per_fetcher import decisions_from_log, observe
from frontierflow.pipelines.speed.settings import ControllerSettings, settings_for
from frontierflow.schemas.records import FetchEvent

BANDWIDTH = Path(__file__).resolve().parents[4] / "shared" / "data" / "bandwidth"
needs_traces = pytest.mark.skipif(not BANDWIDTH.is_dir(), reason="bandwidth traces not present")


def _trace(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace"
    path.write_text(text)
    return path


def test_read_trace_and_capacity(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path, "# a comment\n100\t1.0\n\n105 2.0\n"))
    assert trace.period == 10.0  # last time 5 + median step 5
    assert trace.bytes_per_s(3.0) == 125_000.0  # 1 Mbps
    assert trace.bytes_per_s(12.0) == 125_000.0  # looped: 12 mod 10 = 2
    # 1 Mbps × 5 s + 2 Mbps × 5 s = 125 000·5 + 250 000·5
    assert trace.capacity_bytes(0.0, 10.0) == 1_875_000.0


@pytest.mark.parametrize(
    "text", ["0 1\n0 2\n", "0 1\nfive 2\n", "0 1\n", "0 1\n1 -2\n", "0 1\n1 nan\n"]
)
def test_bad_traces_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(TraceError):
        read_trace(_trace(tmp_path, text))


def _deterministic() -> SimSettings:
    # every page 30 000 B, every latency 0.4 s (σ = 0)
    return SimSettings(page_sigma=0.0, latency_sigma=0.0, duration_s=43.2)


def test_one_thread_on_a_fast_link_by_hand(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path, "0 8\n1 8\n"))  # 8 Mbps = 1 000 000 B/s
    settings = settings_for("fixed-1", initial_threads=1, min_threads=1)
    _, control = make_controller(settings)
    result = simulate_fetcher(trace, control, 1, _deterministic())  # type: ignore[arg-type]
    # a page: 0.4 s latency + 30 000 / 1 000 000 = 0.03 s transfer = 0.43 s; 43.2 s → 100
    assert result.pages == 100
    assert result.useful_bytes == 3_000_000
    assert result.events[0].fetch_ms == pytest.approx(430.0)
    # 4 decisions (windows ending at 10, 20, 30, 40 s); each window holds 23 or 24 pages
    assert [d.threads_after for d in result.decisions] == [1, 1, 1, 1]


def test_saturated_link_shares_capacity(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path, "0 0.8\n1 0.8\n"))  # 100 000 B/s
    _, control = make_controller(settings_for("fixed-8"))
    result = simulate_fetcher(trace, control, 8, _deterministic())  # type: ignore[arg-type]
    # in lock-step: 0.4 s latency (link idle), then 8 × 30 000 B share 100 000 B/s for
    # 2.4 s; a cycle of 2.8 s, 15 whole cycles in 43.2 s = 120 pages, 6/7 of the capacity
    assert result.pages == 120
    assert result.useful_bytes / result.capacity_bytes == pytest.approx(3_600_000 / 4_320_000)
    # processor sharing: each page took 2.8 s instead of the unloaded 0.4 + 0.3 = 0.7 s
    assert {round(e.fetch_ms) for e in result.events} == {2800}


def test_politeness_is_kept_and_violations_are_counted(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path, "0 4\n1 4\n"))
    polite = SimSettings(hosts=2, host_limits=(1,), duration_s=60.0)
    _, control = make_controller(settings_for("fixed-6"))
    result = simulate_fetcher(trace, control, 6, polite)  # type: ignore[arg-type]
    assert result.violations == 0 and result.pages > 0
    rude = replace(polite, enforce_politeness=False)
    _, control = make_controller(settings_for("fixed-6"))
    result = simulate_fetcher(trace, control, 6, rude)  # type: ignore[arg-type]
    assert result.violations > 0


def test_threads_follow_the_decisions(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path, "0 2\n1 2\n"))
    settings = ControllerSettings(controller="aimd", initial_threads=2)
    _, control = make_controller(settings)
    result = simulate_fetcher(trace, control, 2, SimSettings(duration_s=60.0))  # type: ignore[arg-type]
    # AIMD adds one per busy window: 2 → 3 → 4 … unless a fetch failed or was slow
    first = result.decisions[0]
    assert (first.threads_before, first.threads_after) == (2, 3)
    assert result.decisions[1].threads_before == 3


def test_recovery_time_by_hand() -> None:
    capacity = np.array([100.0] * 30 + [10.0] * 30 + [100.0] * 40)
    # drop found at t0 = 35 (10 s mean 46 < 0.5 × 100); the link is back (10 s mean ≥ 80)
    # at t1 = 67; delivering exactly the capacity, the crawl is back at once
    assert recovery_times(capacity, capacity.copy()) == ([0.0], 0)
    # delivering 5 s late after the return: 10 s mean first ≥ 0.8 × min(100, 100) at 72
    lagging = np.array([100.0] * 30 + [10.0] * 35 + [100.0] * 35)
    assert recovery_times(capacity, lagging) == ([5.0], 0)
    # never back to speed: unrecovered
    assert recovery_times(capacity, np.array([100.0] * 30 + [10.0] * 70)) == ([], 1)


@needs_traces
def test_reduced_evaluation_run(tmp_path: Path) -> None:
    out = tmp_path / "speed"
    code = main(
        [
            "simulate",
            "speed",
            "--trace",
            str(BANDWIDTH),
            "--max-traces",
            "2",
            "--duration",
            "120",
            "--controllers",
            "hypothesis,hypothesis-literal,aimd,fixed-4",
            "--workers",
            "1",
            "--plots",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 8  # 2 traces × 4 controllers
    assert all(int(r["violations"]) == 0 for r in rows)
    assert all(0.0 < float(r["capacity_share"]) <= 1.0 for r in rows)
    assert "| hypothesis |" in (out / "summary.md").read_text()
    assert len(list((out / "plots").glob("*.png"))) == 1
    assert (out / "capacity_share.png").stat().st_size > 0


def test_cli_refuses_a_bad_controller(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    trace = _trace(tmp_path, "0 1\n1 1\n")
    argv = ["simulate", "speed", "--trace", str(trace), "--controllers", "fixed-x"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert "fixed-N needs an integer N, got 'fixed-x'" in caplog.text
    assert not (tmp_path / "o").exists()  # refused before any simulation ran


@pytest.mark.parametrize(
    "settings",
    [
        ControllerSettings(),
        ControllerSettings(window_ms=10_000, slide_ms=5_000, allowed_lateness_ms=3_000),
        ControllerSettings(controller="aimd", window_ms=5_000),
    ],
    ids=["fixed-windows", "sliding-late", "aimd"],
)
def test_beam_gives_the_embedded_decisions(
    tmp_path: Path, settings: ControllerSettings, recorded_speed_events: list[FetchEvent]
) -> None:
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    from frontierflow.pipelines.beam.speed import read_beam_decisions, run_beam_speed

    events = recorded_speed_events
    states: dict[str, object] = {}
    for e in events:
        states[e.fetcher_id], _ = observe(states.get(e.fetcher_id), e, settings)  # type: ignore[arg-type]
    assert sum(s.late_events for s in states.values()) > 0  # type: ignore[attr-defined]
    expected = sorted(
        decisions_from_log(events, settings), key=lambda d: (d.fetcher_id, d.window_end)
    )
    run_beam_speed(events, settings, str(tmp_path / "beam"), runner=FnApiRunner())
    got = read_beam_decisions(str(tmp_path / "beam"))
    assert len(expected) > 10
    assert got == expected
    assert initial_controller(settings).threads == expected[0].threads_before
