"""`frontierflow bench-shard-state`: how the shard-keyed state of the unbounded Beam form
(`beam.shard_state`) costs as a shard grows, in this process, without a runner.

Per shard size n (live URLs, each a 12-byte IECA state), for one clock window that
changes `changes` URLs of the shard (half new, half already there): the time and bytes of
appending the window's records to the records bag (what the form does) beside rewriting
the whole shard as one cell (what a ReadModifyWriteState per shard would do at each
window); the time of a compaction (the whole shard rewritten, at most once per n
superseded records) and of a rebuild (the shard decoded from its bag: a process that holds
no copy of it); and what the SDK's state cache pays to weigh the bag once cached (it
walks the cached value at every append): as encoded chunks (the form) and as decoded
records. The state round trips to the runner come on top and do not grow with n.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from apache_beam.coders import BytesCoder
from apache_beam.runners.worker.statecache import get_deep_size

from frontierflow.pipelines.beam.event_time import cheap_state_cache_accounting
from frontierflow.pipelines.beam.shard_state import ShardIndexes, ShardStore
from frontierflow.state.ieca import IecaDistance, encode_ieca


class _Bag:
    """A bag state in memory: what the runner would hold for one shard."""

    def __init__(self) -> None:
        self.items: list[bytes] = []

    def read(self) -> list[bytes]:
        return self.items

    def add(self, item: bytes) -> None:
        self.items.append(item)

    def clear(self) -> None:
        self.items = []


def _url(i: int) -> str:
    return f"https://host-{i % 5_000}.example/section/{i // 5_000}/page-{i}.html"


def _median_s(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def shard_costs(n: int, changes: int, repeats: int) -> dict[str, float]:
    """The figures of one shard of `n` live URLs (see the module docstring)."""
    state = encode_ieca(IecaDistance(1.5, 0))
    store = ShardStore(BytesCoder(), ShardIndexes())
    bag = _Bag()
    index = store.load(0, None, bag)
    store.commit(0, index, {_url(i): state for i in range(n)}, bag)  # one chunk of n
    bag.items = store.compacted(index)
    window = {_url(n + i): state for i in range(changes // 2)}
    window |= {_url(i): encode_ieca(IecaDistance(0.5, 1)) for i in range(changes // 2)}

    def append() -> None:
        store.chunks.encode(list(window.items()))

    def whole() -> None:
        store.chunks.encode(list((index.values | window).items()))

    def compaction() -> None:
        store.compacted(index)

    def rebuild() -> None:
        ShardStore(BytesCoder(), ShardIndexes()).load(0, 1, bag)

    cheap_state_cache_accounting()
    chunks = [*bag.items, store.chunks.encode(list(window.items()))]
    decoded = [record for chunk in chunks for record in store.chunks.decode(chunk)]
    return {
        "append_ms": 1000 * _median_s(append, repeats),
        "append_kb": len(store.chunks.encode(list(window.items()))) / 1024,
        "whole_ms": 1000 * _median_s(whole, repeats),
        "whole_kb": len(store.chunks.encode(list((index.values | window).items()))) / 1024,
        "compaction_ms": 1000 * _median_s(compaction, repeats),
        "rebuild_ms": 1000 * _median_s(rebuild, repeats),
        "weigh_chunks_ms": 1000 * _median_s(lambda: get_deep_size(chunks), repeats),
        "weigh_records_ms": 1000 * _median_s(lambda: get_deep_size(decoded), repeats),
    }


def run_shard_state_bench(sizes: list[int], changes: int = 500, repeats: int = 3) -> str:
    lines = [
        f"one shard, a window changing {changes} of its URLs (half new); medians of {repeats}",
        f"{'live URLs':>10}{'append ms':>11}{'KB':>8}{'whole ms':>10}{'KB':>9}"
        f"{'compact ms':>12}{'rebuild ms':>12}{'weigh chunks ms':>17}{'weigh records ms':>18}",
    ]
    for n in sizes:
        c = shard_costs(n, changes, repeats)
        lines.append(
            f"{n:>10,}{c['append_ms']:>11.2f}{c['append_kb']:>8.1f}{c['whole_ms']:>10.1f}"
            f"{c['whole_kb']:>9,.0f}{c['compaction_ms']:>12.1f}{c['rebuild_ms']:>12.1f}"
            f"{c['weigh_chunks_ms']:>17.2f}{c['weigh_records_ms']:>18.1f}"
        )
    lines.append(
        "append: the form's write per window; whole: one cell per shard rewritten per window; "
        "compact: at most once per n superseded records; rebuild: a shard decoded from its "
        "bag; weigh: the SDK state cache's size walk of the cached bag, per append"
    )
    return "\n".join(lines)
