"""Scheduled revisits (`--revisit`) on the bounded Beam replay: the step core's rule
(`pipelines.core.revisit`), applied per URL and per host in input order, so the schedule is
the embedded engine's.

1. Per URL, with the repeat rule (`beam.exact_clock.decide_repeats`): each page answer's
   kind (first fetch, revisit, repeat) and the page's record after it (`page_fetch`); every
   answer that takes effect becomes a `Visit` keyed by its host (`VISITS`), and the page's
   final record leaves on its own (`RECORDS`).
2. `ScheduleRevisits`: per host, the visits in input order share the host's budget
   (`host_due`); each gives its page's next visit, and a URL's latest one (by position) is
   its revisit entry, or None when that answer downloaded nothing.
3. `MergeRevisits`: per URL, the strategy's update and its revisit meet (`with_revisit`).

The host states and page records come out as (key, bytes) with the keys of the embedded
engine's `revisits` family, so a test can hold the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from operator import itemgetter
from typing import Any

import apache_beam as beam
from apache_beam import typehints

from frontierflow.pipelines.beam.coders import FrontierChangeCoder, UrlUpdate
from frontierflow.pipelines.core.revisit import revisit_entry, with_revisit
from frontierflow.schemas.records import FrontierEntry, change_key
from frontierflow.state.revisit_schedule import (
    HostRevisits,
    RevisitPolicy,
    Visit,
    encode_host_revisits,
    host_due,
    host_revisits_key,
)

VISITS = "visits"
"""The tag of step 1's visits: (host group key, (position, the visit as a plain tuple))."""
RECORDS = "records"
"""The tag of step 1's final page records: (URL, `encode_page_schedule` bytes)."""
HOSTS = "hosts"
"""The tag of step 2's final host states: (`host_revisits_key`, bytes)."""

_CHANGE = FrontierChangeCoder()
Decision = typehints.KV[str, typehints.Tuple[int, bytes]]
"""(URL, (position, its revisit entry's bytes, or b"" for none))."""


def schedule_host(
    grouped: tuple[str, Iterable[tuple[int, tuple[Any, ...]]]],
    policy: RevisitPolicy,
    strategy: str,
) -> Iterator[Any]:
    """One host's visits in input order through `host_due`: per URL its latest decision
    (`Decision`), and the host's final state tagged `HOSTS`."""
    key, visits = grouped
    host: HostRevisits | None = None
    latest: dict[str, tuple[int, bytes]] = {}
    for position, fields in sorted(visits, key=itemgetter(0)):
        visit = Visit(*fields)
        due, host = host_due(host, visit, policy)
        entry = b"" if due is None else _CHANGE.encode(revisit_entry(visit, due, strategy))
        latest[visit.url] = (position, entry)
    yield from latest.items()
    if host is not None:
        yield beam.pvalue.TaggedOutput(HOSTS, (host_revisits_key(key), encode_host_revisits(host)))


class ScheduleRevisits(beam.PTransform):
    """Step 2: visits keyed by host → (`Decision`s, the host states tagged `HOSTS`)."""

    def __init__(self, policy: RevisitPolicy, strategy: str) -> None:
        super().__init__()
        self.policy = policy
        self.strategy = strategy

    def expand(self, visits: Any) -> Any:
        out = (
            visits
            | "VisitsByHost" >> beam.GroupByKey()
            | "HostInOrder"
            >> beam.FlatMap(schedule_host, self.policy, self.strategy).with_outputs(
                HOSTS, main="decisions"
            )
        )
        decisions, hosts = out.decisions, out[HOSTS]
        decisions.element_type = Decision
        hosts.element_type = typehints.KV[str, bytes]
        return decisions, hosts


def merge_revisit(grouped: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[UrlUpdate]:
    """A URL's update (if its strategy changed it) and its revisits' latest decision, as
    the embedded engine folds a step's revisit entries into its changes."""
    url, joined = grouped
    updates = list(joined["updates"])
    update = updates[0] if updates else UrlUpdate(url, None, ())
    decisions = list(joined["revisits"])
    if not decisions:
        yield update
        return
    _, raw = max(decisions, key=itemgetter(0))
    if not raw:  # the latest answer downloaded nothing: the strategy's change stands
        yield update
        return
    entry = _CHANGE.decode(raw)
    assert isinstance(entry, FrontierEntry)  # a revisit is an entry
    changes = [c for c in update.changes if change_key(c) != url]
    current = next((c for c in update.changes if change_key(c) == url), None)
    yield replace(update, changes=(*changes, with_revisit(current, entry)))


class MergeRevisits(beam.PTransform):
    """Step 3: (the strategy's `UrlUpdate`s, the `Decision`s) → the updates with each URL's
    revisit folded in."""

    def expand(self, pcolls: Any) -> Any:
        updates, decisions = pcolls
        keyed = updates | "ByUrl" >> beam.Map(lambda u: (u.url, u)).with_output_types(
            typehints.KV[str, UrlUpdate]
        )
        return (
            {"updates": keyed, "revisits": decisions}
            | "UpdatesAndRevisits" >> beam.CoGroupByKey()
            | "Merge" >> beam.FlatMap(merge_revisit).with_output_types(UrlUpdate)
        )
