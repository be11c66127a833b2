"""The progress of `frontierflow crawl` on stderr: a bar on a terminal, else one line every
few seconds (downloads, downloads a second over the last seconds, the fetcher's queue)."""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, TextIO

RATE_WINDOW_S = 10.0
"""The rate is measured over this many seconds, so a pause shows soon."""


@dataclass(frozen=True, slots=True)
class CrawlProgress:
    """One reading of the crawl."""

    pages: int
    """Downloads of this run (answers to be asked again, 429 or 503, included)."""
    queued: int
    """Frontier entries waiting in the fetcher's queues."""
    in_flight: int
    workers: int


class ProgressDisplay:
    """Shows readings: `show` as often as convenient, `close` at the end."""

    def __init__(self, budget: int | None, every_s: float, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._every_s = every_s
        self._samples: deque[tuple[float, int]] = deque()
        self._last_line = float("-inf")
        self._budget = budget
        self._bar: Any = None

    def rate(self, now: float, pages: int) -> float:
        """Downloads a second over the last `RATE_WINDOW_S` seconds of readings."""
        samples = self._samples
        samples.append((now, pages))
        while len(samples) > 2 and samples[1][0] <= now - RATE_WINDOW_S:
            samples.popleft()
        t0, p0 = samples[0]
        return (pages - p0) / (now - t0) if now > t0 else 0.0

    def show(self, reading: CrawlProgress) -> None:
        if self._bar is None and self._stream.isatty():  # from the first reading on
            from tqdm import tqdm

            self._bar = tqdm(
                total=self._budget,
                unit="page",
                file=self._stream,
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} pages [{elapsed}{postfix}]",
            )
        now = time.monotonic()
        rate = self.rate(now, reading.pages)
        state = (
            f"{rate:.1f}/s, {reading.queued} queued, {reading.in_flight} in flight, "
            f"{reading.workers} workers"
        )
        if self._bar is not None:
            self._bar.update(reading.pages - self._bar.n)
            self._bar.set_postfix_str(state, refresh=True)
        elif now - self._last_line >= self._every_s:
            self._last_line = now
            print(f"crawl: {reading.pages} pages, {state}", file=self._stream, flush=True)

    def say(self, text: str) -> None:
        """A message between the readings (above the bar on a terminal)."""
        if self._bar is not None:
            self._bar.write(text, file=self._stream)
        else:
            print(text, file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
