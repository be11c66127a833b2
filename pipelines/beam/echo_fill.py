"""The echo fill of the bounded replay (`beam.replay`): logs without echo (a WARC, another
crawler's log) replayed in rounds, each a run of the pipeline, until the echoes settle.

The echo of an event without one comes from the state of the key its strategy names (the
step core's `echo_fill_key`) as it stood at the event's position. That state depends on the
echoes of earlier events, so round r routes with the echoes found in round r − 1 (given to
it by bucket of the crawl clock, `given_fills`), and each key's fold reads its state at
every such event's position (a `probe_message` routed before the event's own messages) and
outputs the echo it implies (`echo_at_probe`), written beside the round's results
(`write_fills`). When a round finds the echoes it was given, its output is the embedded
engine's; the rounds needed are at most the longest chain of events without echo each
filled from one before it (the crawl depth, for a crawl logged without echoes).
`run_fill_rounds` runs them. Events that carry an echo take the fast path unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from frontierflow.pipelines.beam import exact_clock
from frontierflow.pipelines.core.step import with_echo_from_state
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.records import FetchEvent

logger = logging.getLogger(__name__)

PROBE = "Probe"
"""The type name of a probe message: read the key's state for an event without echo."""
FILLS = "fills"
"""The tag of the folds' echo output when echoes are filled."""
MAX_FILL_ROUNDS = 64

Fills = dict[tuple[str, int], dict[str, str]]
"""(crawl id, position) → the echo found for the event there."""


def probe_message(event: FetchEvent) -> tuple[Any, ...]:
    """The probe an event without echo sends to the key whose state fills it, as a message
    tuple (primitives only)."""
    return (PROBE, event.url, event.via, event.crawl_id, event.cycle, event.fetched_at)


def echo_at_probe(
    strategy: Strategy[Any], probe: tuple[Any, ...], state: Any
) -> tuple[str, dict[str, str]]:
    """(crawl id, echo) of the probing event, from the key's `state` as it stands at the
    probe (the step core's `with_echo_from_state`); the echo may be empty."""
    _, page, via, crawl_id, cycle, fetched_at = probe
    event = FetchEvent(page, fetched_at, 0, "", "", via, crawl_id, cycle)
    return crawl_id, with_echo_from_state(strategy, event, state).echo


def given_fills(pipeline: beam.Pipeline, fills: Fills) -> Any:
    """The echoes a round is given, keyed by the bucket of the crawl clock their event is
    routed in: ((crawl id, bucket), (position, echo))s."""
    bucket = exact_clock.CLOCK_BUCKET
    return pipeline | "GivenEchoes" >> beam.Create(
        [
            ((crawl, position // bucket), (position, echo))
            for (crawl, position), echo in fills.items()
        ]
    )


def write_fills(found: Any, out_prefix: str) -> None:
    """Write the echoes a round found, (crawl id, position, echo)s, as
    `<out>-echo-fills*.jsonl`."""
    (
        found
        | "FillLines"
        >> beam.MapTuple(lambda c, p, e: json.dumps({"crawl_id": c, "position": p, "echo": e}))
        | "WriteFills" >> beam.io.WriteToText(out_prefix + "-echo-fills", ".jsonl")
    )


def read_fills(out_prefix: str) -> Fills:
    """The echoes a round wrote under `out_prefix`: (crawl id, position) → echo."""
    fills: Fills = {}
    for match in FileSystems.match([out_prefix + "-echo-fills*"])[0].metadata_list:
        with FileSystems.open(match.path) as handle:
            for line in handle.read().decode().splitlines():
                row = json.loads(line)
                fills[(row["crawl_id"], row["position"])] = row["echo"]
    return fills


def delete_outputs(out_prefix: str) -> None:
    """Remove what an earlier round wrote under `out_prefix` (shard counts may differ)."""
    parts = ("frontier", "state", "dead-letters", "echo-fills")
    patterns = [f"{out_prefix}-{part}*" for part in parts]
    paths = [m.path for result in FileSystems.match(patterns) for m in result.metadata_list]
    if paths:
        FileSystems.delete(paths)


def run_fill_rounds(
    run_round: Callable[[Fills], None], out_prefix: str, max_rounds: int = MAX_FILL_ROUNDS
) -> int:
    """Run `run_round` (one run of the pipeline writing under `out_prefix`, given the
    echoes found so far) until a round finds the echoes it was given, at most `max_rounds`
    times; returns how many rounds ran."""
    fills: Fills = {}
    for round_ in range(1, max_rounds + 1):
        delete_outputs(out_prefix)
        run_round(fills)
        found = read_fills(out_prefix)
        changed = sum(found.get(k) != fills.get(k) for k in found.keys() | fills.keys())
        logger.info("echo fill round %d: %d events filled, %d changed", round_, len(found), changed)
        if found == fills:
            return round_
        fills = found
    logger.warning(
        "echo fill still changing after %d rounds: the output is the last round's, not exact",
        max_rounds,
    )
    return max_rounds
