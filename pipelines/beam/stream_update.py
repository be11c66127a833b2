"""Step 3 of the unbounded form (`beam.stream`): each URL's messages of a clock window
applied to its state, kept per shard of the URLs (`beam.shard_state`), in event time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import (
    BytesCoder,
    FastPrimitivesCoder,
    NullableCoder,
    TupleCoder,
    VarIntCoder,
)
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer

from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.event_time import (
    APPLY_AFTER_US,
    HELD_STATE,
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    keep_taken,
    pending_spec,
    take_due,
    with_through,
)
from frontierflow.pipelines.beam.hosts import hold_update, keep_pauses
from frontierflow.pipelines.beam.replay import apply_encoded
from frontierflow.pipelines.beam.shard_state import ShardStore, records_spec
from frontierflow.pipelines.beam.stream_revisits import apply_with_revisits, has_revisit
from frontierflow.pipelines.beam.window_batches import (
    BATCH_CODER,
    due_messages,
    one_per_window,
    pause_runs,
    window_batch,
    with_crawl_clock,
)
from frontierflow.pipelines.core.strategy import Strategy


class UpdateFrontierInEventTime(beam.PTransform):
    """The repeat step's routed windows (`beam.routing.RoutedWindow`, stamped 1 ms past their
    window's due) → one `UrlUpdate` per URL and window, stamped 3 ms past it (its version:
    (due µs, position, index) of the last message applied). State is keyed by a shard of
    the URL (`beam.shard_state`): each repeat shard sends a window's messages for a shard as
    one item, with the pages it counted in the window, which the stateful step holds as
    they come; on an event-time timer in the global window it sets the messages' crawl
    clock from the running count it keeps (`window_batches.with_crawl_clock`), merges a
    window's items (`window_batches.one_per_window`) and applies them in window order, each
    URL's messages in (position, index) order. No grouping step between the repeat step
    and this one: a grouping fires only once the watermark has passed its window, one more
    step for a window's messages to wait through. With `revisits`, a URL's messages may
    hold its window's revisit decision (`beam.stream_revisits`); without, none is looked
    for."""

    def __init__(self, strategy: Strategy[Any], revisits: bool = False) -> None:
        super().__init__()
        self.strategy = strategy
        self.revisits = revisits

    def expand(self, inputs: Any) -> Any:
        """`keyed` (the routed messages), or a tuple of it with the revisit decisions
        (`beam.stream_revisits.RevisitsInEventTime`, messages of their windows) and the
        pauses (`beam.hosts.PausesInEventTime`), whose entries it holds."""
        keyed = inputs | "WithPauses" >> beam.Flatten() if isinstance(inputs, tuple) else inputs
        return (
            keyed
            | "OneBatch"
            >> beam.MapTuple(lambda shard, item: (shard, window_batch(item))).with_output_types(
                typehints.KV[int, typehints.Tuple[int, int, bytes]]
            )
            | "ApplyInEventTime"
            >> beam.ParDo(_ApplyInEventTime(self.strategy, self.revisits))
            .with_input_types(typehints.KV[int, typehints.Tuple[int, int, bytes]])
            .with_output_types(UrlUpdate)
        )


class _ApplyInEventTime(beam.DoFn):
    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # ((the shard's generation, the pauses that can still hold an entry,
        # the pages counted per crawl; no generation while it holds no URL), the due taken
        # through), and the earliest due waiting
        held_coder(
            with_through(
                TupleCoder(
                    [NullableCoder(VarIntCoder()), FastPrimitivesCoder(), FastPrimitivesCoder()]
                )
            )
        ),
    )
    PENDING = pending_spec(TupleCoder([VarIntCoder(), VarIntCoder(), BytesCoder()]))
    RECORDS = records_spec()  # the shard's URLs' encoded states (`beam.shard_state`)
    TIMER = TimerSpec("update_due", TimeDomain.WATERMARK)

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def __init__(self, strategy: Strategy[Any], revisits: bool = False) -> None:
        self.strategy = strategy
        self.revisits = revisits
        self.store = ShardStore(BytesCoder())

    def process(
        self,
        element: tuple[int, tuple[Any, ...]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, pending, timer, APPLY_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        shard: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        records: Any = beam.DoFn.StateParam(RECORDS),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, held_batches, rest = take_due(fired, held, pending, timer, APPLY_AFTER_US)
        if not held_batches:
            return
        generation, live, counted = value[0] if value else (None, {}, {})
        index = self.store.load(shard, generation, records)
        changes: dict[str, bytes | None] = {}
        clocked = with_crawl_clock(
            [(due, at, *BATCH_CODER.decode(b)) for due, at, b in held_batches], counted
        )
        for pauses, batches in pause_runs(one_per_window(clocked)):
            live = keep_pauses(live, pauses, -1)
            for url, messages in due_messages(batches).items():
                current = changes[url] if url in changes else index.values.get(url)
                if self.revisits and has_revisit(messages):  # a window's decision among them
                    encoded, latest, applied = apply_with_revisits(
                        self.strategy, url, current, messages
                    )
                else:
                    encoded, latest = apply_encoded(
                        self.strategy,
                        url,
                        current,
                        ((crawled, now_ms, m) for *_, crawled, now_ms, m in messages),
                    )
                    applied = True
                if applied:
                    changes[url] = encoded
                update = UrlUpdate(url, encoded, tuple(latest.values()), tuple(messages[-1][:3]))
                yield hold_update(update, live)
        generation = self.store.commit(shard, index, changes, records)
        through = held_batches[-1][0]
        kept = (generation, keep_pauses(live, {}, through // 1000), counted)
        keep_taken(held, pending, (kept, through), rest)
