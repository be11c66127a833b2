"""What `bench kafka --beam-stream` asks a Flink session cluster's REST API: the jobs
running, a job cancelled, and how far each step of the job trails the wall clock (its input
watermark, sampled while the bench measures latency).

A vertex's lag at a sample is the wall clock minus the least input watermark of its subtasks
(`/jobs/<id>/vertices/<vertex>/watermarks`). The steps of the unbounded form fire on
event-time timers, so the lag a vertex adds over the one before it is what a window waits
there. Sampling costs the job: each sample makes the JobManager fetch every metric of every
TaskManager (at most once per `metrics.fetcher.update-interval`, 500 ms on
`infra/flink/cluster.sh`'s clusters), work the TaskManagers do beside the job's. Sampled
every second with each vertex's busy time too, on a warm cluster, the bench's latency at p50
was 8.3 and 10.8 s against 5.7 and 3.3 s in the runs alternating with them (2,000 events, a
2-core machine), so this sampler takes only the watermarks, every `SAMPLE_S`."""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

SAMPLE_S = 3.0
"""Seconds between samples."""


def rest(master: str, path: str, method: str = "GET") -> Any:
    """The decoded JSON answer of the REST API at `master` to `method` `path` (None: empty)."""
    request = urllib.request.Request(f"http://{master}{path}", method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def cancel_job(master: str, job_id: str) -> None:
    """Cancel a job of the session cluster."""
    rest(master, f"/jobs/{job_id}?mode=cancel", "PATCH")


def cluster_jobs(master: str) -> set[str]:
    """The ids of the session cluster's running jobs."""
    jobs = rest(master, "/jobs")["jobs"]
    return {job["id"] for job in jobs if job["status"] in ("RUNNING", "CREATED", "RESTARTING")}


@dataclass
class WatermarkLags:
    """Samples the input watermark lag of each vertex of the cluster's running jobs not in
    `before` (the job under measurement), in a thread, from `start` until `stop`."""

    master: str
    before: set[str]
    every_s: float = SAMPLE_S
    lags: dict[str, list[float]] = field(default_factory=dict)
    """Vertex name → its lags in seconds."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="watermark-lags", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (again: no effect)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.sample()

    def sample(self) -> None:
        """One sample of every vertex of the job under measurement."""
        for job_id in cluster_jobs(self.master) - self.before:
            for vertex in rest(self.master, f"/jobs/{job_id}")["vertices"]:
                marks = rest(self.master, f"/jobs/{job_id}/vertices/{vertex['id']}/watermarks")
                lag = vertex_lag(marks, time.time() * 1000)
                if lag is not None:
                    self.lags.setdefault(vertex["name"], []).append(lag)

    def lines(self) -> list[str]:
        """One line per vertex: its median and largest lag over the samples, the least
        median first (a step's lag is at least that of the steps before it, so this is
        their order along the pipeline, ties aside)."""
        if not self.lags:
            return ["watermark lag per vertex: no sample"]
        samples = max(len(v) for v in self.lags.values())
        out = [
            f"input watermark lag per vertex (wall clock minus the least input watermark of "
            f"its subtasks; {samples} samples, one every {self.every_s:g} s): median, max"
        ]
        for name, lags in sorted(self.lags.items(), key=lambda item: statistics.median(item[1])):
            out.append(f"  {statistics.median(lags):6.1f} s {max(lags):6.1f} s  {_short(name)}")
        return out


def vertex_lag(marks: list[dict[str, Any]], now_ms: float) -> float | None:
    """Seconds from the least input watermark among a vertex's subtasks to `now_ms`; None
    before every subtask has one (a source has no input watermark; a watermark at or below
    0 is Flink's "none yet")."""
    values = [float(m["value"]) for m in marks if m["id"].endswith("currentInputWatermark")]
    if not values or min(values) <= 0:
        return None
    return (now_ms - min(values)) / 1000


def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
