"""What the embedded engine counts: below the engine, the step and the observer, which all
read it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class EngineStats:
    """Counters since the engine started (not persisted)."""

    events: int = 0
    """Page answers routed: first fetches and revisits."""
    revisits: int = 0
    """Of those, answers to scheduled revisits (`--revisit`)."""
    duplicates: int = 0
    dead_letters: int = 0
    links: int = 0
    entries: int = 0
    removals: int = 0
    recomputations: int = 0
    decisions: int = 0
    speed_skipped: int = 0
    """Valid events the speed statistics could not use (empty fetcher id, ...)."""
    deferred: int = 0
    """Answers a fetcher will ask again (`will_retry`: a 429, a 503, no answer): they
    changed their host's state only."""
    held: int = 0
    """Frontier entries sent with a `not_before`: their host was paused."""
    pauses: int = 0
    """Host pauses begun (a 429 or 503, a run of failures: `state.hosts`)."""
    steps: int = 0
    """Steps applied and flushed (committed, or waiting for the end of a commit interval)."""
    commits: int = 0
    """Write batches committed (one per step with a commit interval of 1)."""
    dead_reasons: dict[str, int] = field(default_factory=dict)
