"""Helpers every concrete strategy shares: building FrontierEntries, echo fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frontierflow.pipelines.core.strategy import CrawlClock
from frontierflow.schemas.records import FrontierEntry
from frontierflow.state.urls import host_of


@dataclass(frozen=True, slots=True)
class EntryFactory:
    """Builds FrontierEntries of one strategy; one place that fills the common fields."""

    strategy: str

    def entry(
        self,
        url: str,
        priority: float,
        crawl_id: str,
        cycle: int,
        via: str | None,
        clock: CrawlClock,
        echo: Mapping[str, str],
    ) -> FrontierEntry:
        return self.entry_owning_echo(url, priority, crawl_id, cycle, via, clock.now_ms, dict(echo))

    def entry_owning_echo(
        self,
        url: str,
        priority: float,
        crawl_id: str,
        cycle: int,
        via: str | None,
        now_ms: int,
        echo: dict[str, str],
    ) -> FrontierEntry:
        """Like `entry`, for a hot path whose `echo` is a fresh dict the entry may keep."""
        return FrontierEntry(
            url, host_of(url), priority, self.strategy, crawl_id, cycle, via, now_ms, echo
        )


def echo_float(echo: Mapping[str, Any], name: str, default: float) -> float:
    """A float the strategy stored in an entry's echo; `default` if absent or unreadable."""
    raw = echo.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if value == value else default  # NaN → default


def fmt_float(value: float) -> str:
    """Exact text form of a float for an echo field (round-trips through float())."""
    return repr(float(value))
