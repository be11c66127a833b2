"""What the embedded engine tells an onlooker after each committed step.

An operator's page (`pipelines/ui`) wants to see what the engine already knows — the
frontier changes, dead letters and ScalingDecisions of a step, how long it took, the pages
the relevance judge saw — without a second pass over the state. The engine hands each
committed step to a `StepObserver` as a `StepReport`; with no observer (the default) it
builds none, so watching costs nothing when nobody watches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from frontierflow.pipelines.embedded.stats import EngineStats
from frontierflow.schemas.records import DeadLetter, FrontierChange, ScalingDecision
from frontierflow.state.hosts import HostState


@dataclass(frozen=True, slots=True)
class StepReport:
    """One committed step, as the engine saw it.

    `changes` are the latest frontier change per key, as written to the sink; `stats` are
    the engine's counters after the step (the same ones the job's Prometheus metrics
    advance by); `similarities` are the topic similarities (Akbari Torkestani 2012, eqs. 4–5) of the
    pages first fetched in the step, for a strategy that judges pages
    (`Strategy.judges_pages`), else empty; `seconds` is the step's wall time from its first
    item to its commit (for a step whose commit waits for a later step of its commit
    interval, to its flush). An engine with a commit interval reports its steps when they
    are committed, in order; `hosts` are the queue groups the step's answers changed.
    """

    changes: Sequence[FrontierChange]
    dead_letters: Sequence[DeadLetter]
    decisions: Sequence[ScalingDecision]
    similarities: Sequence[float]
    stats: EngineStats
    seconds: float
    hosts: Mapping[str, HostState] = field(default_factory=dict)
    """The host states (`state.hosts.group_key` → state) the step's events changed."""


class StepObserver(Protocol):
    """Receives every committed step and, from a live job, the input lag. Called on the
    engine's thread: an observer must be quick and must not raise."""

    def step_committed(self, report: StepReport) -> None: ...

    def input_lag(self, records: int) -> None: ...
