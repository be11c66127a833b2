"""`frontierflow bench kafka --ui`: what the operator's page costs the live job. Runs of the
job without and with `--ui-port` and a client polling its summary as the page does, the two
kinds alternating, in events a second and events per CPU second of the job's process."""

from __future__ import annotations

import resource
import socket
import statistics
import tempfile
import threading
import urllib.request
from pathlib import Path

from frontierflow.pipelines.bench.engine import (
    PAGE_POLL_S,
    BenchSetup,
    generated_events,
)
from frontierflow.pipelines.bench.kafka import (
    KafkaBenchSetup,
    fresh_settings,
    produce_events,
    timed_job,
)
from frontierflow.schemas.codecs import AvroCodec


def run_ui_bench(setup: KafkaBenchSetup) -> str:
    """events/s of the live job without and with `--ui-port` and a polling client, and
    events per CPU second of the job's process (its start-up's CPU, measured on an empty
    topic, taken off), the two kinds alternating."""
    gen = BenchSetup(events=setup.events, outlinks=setup.outlinks, urls=setup.urls)
    codec = AvroCodec.for_name("FetchEvent")
    values = [codec.encode(e) for e in generated_events(gen, seed=1)]
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu_rates: dict[bool, list[float]] = {False: [], True: []}
    polls: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        startup = {
            page: _page_run(setup, [], Path(tmp) / f"empty-{page}", page)[1]
            for page in (False, True)
        }
        for run in range(2 * setup.ui_repeats):
            page = run % 2 == 1
            seconds, cpu, answers = _page_run(setup, values, Path(tmp) / f"state-{run}", page)
            rates[page].append(len(values) / seconds)
            cpu_rates[page].append(len(values) / max(1e-9, cpu - startup[page]))
            if page:
                polls.append(answers)
    med = {page: statistics.median(rates[page]) for page in rates}
    cpu_med = {page: statistics.median(cpu_rates[page]) for page in cpu_rates}

    def runs(values: list[float]) -> str:
        return ", ".join(f"{r:,.0f}" for r in values)

    return "\n".join(
        [
            f"{len(values):,} FetchEvents ({setup.outlinks} outlinks each) through one broker, "
            f"{setup.ui_repeats} runs of each kind, alternating; medians",
            f"{'run':<44}{'events/s':>10}{'events/CPU s':>14}   runs (events/s; per CPU s)",
            f"{'frontierflow run (ieca, RocksDB)':<44}{med[False]:>10,.0f}{cpu_med[False]:>14,.0f}"
            f"   {runs(rates[False])}; {runs(cpu_rates[False])}",
            f"{'  with --ui-port, the page polled every 1 s':<44}{med[True]:>10,.0f}"
            f"{cpu_med[True]:>14,.0f}   {runs(rates[True])}; {runs(cpu_rates[True])}",
            f"ratio with the page / without: events/s {med[True] / med[False]:.3f}, "
            f"events per CPU second {cpu_med[True] / cpu_med[False]:.3f} (target >= 0.95); "
            f"job start-up CPU taken off: {startup[False]:.1f} s, {startup[True]:.1f} s; "
            f"summaries served per run: {', '.join(map(str, polls))}",
        ]
    )


def _page_run(
    setup: KafkaBenchSetup, values: list[bytes], state: Path, page: bool
) -> tuple[float, float, int]:
    """One job over `values` on fresh topics, with the page open or not: (seconds as
    `timed_job` counts them, CPU seconds of the job's process, summaries served)."""
    job = fresh_settings(setup.bootstrap_servers)
    produce_events(job, values)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    extra: list[str] = []
    answers = 0
    if page:
        port = _free_port()
        extra = ["--ui-port", str(port)]
        with _PagePoller(port) as poller:
            seconds = timed_job(
                job, state, setup.step_size, len(values), extra, client=setup.clients[0]
            )[0]
        answers = poller.answers
    else:
        seconds = timed_job(job, state, setup.step_size, len(values), client=setup.clients[0])[0]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, answers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _PagePoller:
    """What an open page does to the job: GET /api/summary every `PAGE_POLL_S`, in a
    thread; `answers` counts the summaries received."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/api/summary"
        self.answers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(PAGE_POLL_S):  # the page's pace, not a wait for a result
            try:
                with urllib.request.urlopen(self.url, timeout=5) as answer:
                    answer.read()
                self.answers += 1
            except OSError:
                pass  # the job is starting or has ended: the page retries likewise

    def __enter__(self) -> _PagePoller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
