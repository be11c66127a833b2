"""The state and the log of `frontierflow bench --scale`: N URLs already known, then a crawl.

The state is built in bulk, not by the engine: the IECA states of N known URLs (ranks
0..N-1, one in `FETCHED_EVERY` already fetched) and the engine's crawled marks of the
fetched ones, as SST files in the store's own key and value encodings, ingested into a
new store (`state.storage.bulk`); then the crawl counter. That takes minutes at 100M URLs
where the engine would take hours, and leaves the store as a long crawl's compactions
would: sorted, on the last level.

The log is what the engine is timed on. Each event fetches a known URL not fetched yet and
links to `outlinks` distinct URLs: a `new_share` of them URLs never seen (ranks from N
on, drawn uniformly from 4 times as many as the log draws, so some are linked again
within the log), the rest known URLs drawn by Zipf popularity over the N (rank r with
weight (r+1)^-0.8), as in a crawl where most outlinks are new and a few pages are
linked from everywhere. The log has the same shape at every N; only the state differs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from frontierflow.pipelines.bench.engine import HOSTS, ZIPF_EXPONENT, bench_event
from frontierflow.pipelines.bench.scale_worker import STRATEGY, families
from frontierflow.pipelines.embedded.replay import REPLAY_COMMIT_EVERY
from frontierflow.schemas.container import write_container
from frontierflow.state.ieca import IecaDistance, encode_ieca
from frontierflow.state.storage.bulk import SST_FILE_BYTES, SortedSstWriter
from frontierflow.state.storage.codec import encode_i32, encode_u64
from frontierflow.state.storage.format import CRAWLED_FAMILY, crawled_key
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.rocksdb_options import RocksDBOptions
from frontierflow.state.storage.store import META_FAMILY

FETCHED_EVERY = 4
"""A known URL of rank r was fetched before the log when r % 4 == 0."""
CRAWL_ID = "bench"
NEW_SPAN = 4
"""New URLs are drawn from NEW_SPAN times as many ranks as the log draws new links."""
PAGE_STRIDE = 7919
"""Event i fetches the (i·7919 mod U)-th of the U known URLs not fetched yet (a prime
stride: distinct pages, spread over the hosts)."""
SECTIONS = 97
"""Path sections of a host."""
_TOKEN_MULTIPLIER = 0x9E3779B97F4A7C15
_TOKEN_MASK = (1 << 48) - 1


def scale_url(rank: int) -> str:
    """The URL of popularity rank `rank` (0-based): ~65 characters, as URLs on the web
    are, with a path of which 12 hex digits are as good as random (so the keys do not
    compress better than real ones would)."""
    token = (rank * _TOKEN_MULTIPLIER) & _TOKEN_MASK
    return (
        f"https://www.site{rank % HOSTS}.example.org/section{rank // HOSTS % SECTIONS}/"
        f"{token:012x}-{rank}.html"
    )


def host_keys(host: int, ranks: Sequence[int]) -> list[bytes]:
    """`scale_url(r).encode()` for ranks `r` of one host (r % HOSTS == host), in one pass
    (what building 100M keys takes)."""
    prefix = f"https://www.site{host}.example.org/section"
    multiplier, mask = _TOKEN_MULTIPLIER, _TOKEN_MASK
    return [
        f"{prefix}{r // HOSTS % SECTIONS}/{(r * multiplier) & mask:012x}-{r}.html".encode()
        for r in ranks
    ]


def _host_prefix(host: int) -> str:
    """What every URL of `host` starts with; no host's is the start of another's, so the
    hosts in the order of these hold their keys in bytewise order."""
    return f"https://www.site{host}.example.org/"


def known_distance(rank: int) -> float:
    """The IECA distance a known URL of `rank` has in the built state (and in the echo of
    an event that fetches it)."""
    return 0.3 + (rank % SECTIONS) / 10


_VALUE_CYCLE = SECTIONS * FETCHED_EVERY
"""A known URL's state depends on its rank modulo this only."""


@dataclass(frozen=True, slots=True)
class ScaleLogSetup:
    """The shape of the timed log (the same at every population)."""

    events: int = 200_000
    outlinks: int = 30
    new_share: float = 0.6

    def __post_init__(self) -> None:
        if self.events < 1 or self.outlinks < 1:
            raise ValueError("--events and --outlinks must be >= 1")
        if not 0.0 <= self.new_share <= 1.0:
            raise ValueError(f"--new-share must be in [0, 1], got {self.new_share}")

    @property
    def new_links(self) -> int:
        """New URLs each event links to; the rest of its outlinks are known ones."""
        return round(self.outlinks * self.new_share)


@dataclass(frozen=True, slots=True)
class BuiltState:
    """What `build_state` put into a store."""

    urls: int
    fetched: int
    files: int
    seconds: float


def unfetched_rank(index: int) -> int:
    """The `index`-th (0-based) known rank not fetched before the log: ranks r with
    r % FETCHED_EVERY != 0, in order."""
    per = FETCHED_EVERY - 1
    return FETCHED_EVERY * (index // per) + 1 + index % per


def unfetched_count(urls: int) -> int:
    return urls - math.ceil(urls / FETCHED_EVERY)


def build_state(
    state_dir: Path, urls: int, options: RocksDBOptions, work: Path, file_bytes: int
) -> BuiltState:
    """A new store at `state_dir` holding the IECA states of `urls` known URLs, the
    crawled marks of the fetched ones and the crawl counter (module docstring); SST files
    of about `file_bytes` are written under `work` and moved into the store."""
    started = time.perf_counter()
    ieca = SortedSstWriter(work / "ieca", options, file_bytes=file_bytes)
    crawled = SortedSstWriter(work / "crawled", options, file_bytes=file_bytes)
    done = encode_i32(0)
    values = [  # rank % (SECTIONS · FETCHED_EVERY) -> the encoded state
        encode_ieca(IecaDistance(known_distance(r), 0 if r % FETCHED_EVERY == 0 else -1))
        for r in range(_VALUE_CYCLE)
    ]
    for host in sorted(range(min(HOSTS, urls)), key=_host_prefix):
        ranks = range(host, urls, HOSTS)
        keys = host_keys(host, ranks)
        order = sorted(range(len(keys)), key=keys.__getitem__)
        ieca.put_many((keys[i], values[ranks[i] % _VALUE_CYCLE]) for i in order)
        crawled.put_many((keys[i], done) for i in order if ranks[i] % FETCHED_EVERY == 0)
    fetched = crawled.written
    with RocksDBStore(state_dir, families(), options) as store:
        ieca_files, crawled_files = ieca.finish(), crawled.finish()
        store.ingest(STRATEGY, ieca_files)
        store.ingest(CRAWLED_FAMILY, crawled_files)
        with store.transaction() as txn:
            txn.put(META_FAMILY, crawled_key(CRAWL_ID), encode_u64(fetched))
    seconds = time.perf_counter() - started
    return BuiltState(urls, fetched, len(ieca_files) + len(crawled_files), seconds)


def zipf_ranks(rng: np.random.Generator, size: int, urls: int) -> np.ndarray:
    """`size` ranks in [0, urls) of a power-law popularity, rank r about as likely as
    (r+1)^-0.8: the continuous inverse CDF of x^-0.8 on [1, urls+1), floored. No table of
    the N weights: the same cost at 100M URLs as at 1M."""
    power = 1.0 - ZIPF_EXPONENT
    top = (urls + 1.0) ** power - 1.0
    ranks = np.floor((1.0 + rng.random(size) * top) ** (1.0 / power)) - 1.0
    return np.minimum(ranks.astype(np.int64), urls - 1)


def scale_events(
    setup: ScaleLogSetup, urls: int, seed: int = 0, *, new_seen: np.ndarray | None = None
) -> Iterator[dict[str, object]]:
    """The timed log's FetchEvents as Avro dicts (module docstring); marks in `new_seen`,
    when given (`new_span` booleans), the new URLs linked (rank − urls)."""
    unfetched = unfetched_count(urls)
    if unfetched < 1:
        raise ValueError(f"{urls} URLs leave none to fetch")
    stride = PAGE_STRIDE
    while math.gcd(stride, unfetched) != 1:
        stride += 2
    new_links = setup.new_links
    known_links = setup.outlinks - new_links
    span = new_span(setup)
    rng = np.random.default_rng(seed)
    batch = 4096
    for first in range(0, setup.events, batch):
        count = min(batch, setup.events - first)
        known = zipf_ranks(rng, count * 2 * known_links, urls).reshape(count, 2 * known_links)
        new = (urls + rng.integers(0, span, size=(count, 2 * new_links))).tolist()
        for i, known_row, new_row in zip(
            range(first, first + count), known.tolist(), new, strict=True
        ):
            page = unfetched_rank((i * stride) % unfetched)
            linked_new = list(dict.fromkeys(new_row))[:new_links]
            links = [*list(dict.fromkeys(known_row))[:known_links], *linked_new]
            if new_seen is not None:
                new_seen[[r - urls for r in linked_new]] = True
            yield bench_event(
                scale_url(page),
                i,
                [scale_url(r) for r in links if r != page],
                CRAWL_ID,
                known_distance(page),
            )


def new_span(setup: ScaleLogSetup) -> int:
    """How many ranks past the known ones the new links are drawn from."""
    return max(1, NEW_SPAN * setup.events * setup.new_links)


def write_scale_log(path: Path, setup: ScaleLogSetup, urls: int, seed: int = 0) -> int:
    """The timed log as an Avro container file; returns how many distinct new URLs it
    links to (the state grows by as many)."""
    new_seen = np.zeros(new_span(setup), dtype=np.bool_)
    events = scale_events(setup, urls, seed, new_seen=new_seen)
    write_container(path, "FetchEvent", events, codec="null")
    return int(np.count_nonzero(new_seen))


DEFAULT = "default"
"""The variant of the store options that is `RocksDBOptions()`."""
HELD = "default-files-held"
"""The report's row of the default run with the built state's files held in memory
(`--hold-files`): not a set of store options."""

_MIB = 1024 * 1024

VARIANTS: dict[str, RocksDBOptions] = {
    DEFAULT: RocksDBOptions(),
    "before": RocksDBOptions(
        block_cache_size=64 * _MIB,
        index_and_filters_in_cache=False,
        partitioned_index_and_filters=False,
        memtable_budget=0,
        max_total_wal_size=0,
        meta_write_buffer_size=64 * _MIB,
        compression="lz4",
        bottommost_compression="lz4",
    ),
    "lz4": RocksDBOptions(compression="lz4", bottommost_compression="lz4"),
    "filters-outside-cache": RocksDBOptions(
        index_and_filters_in_cache=False, partitioned_index_and_filters=False
    ),
    "filters-outside-320m": RocksDBOptions(
        block_cache_size=320 * _MIB,
        index_and_filters_in_cache=False,
        partitioned_index_and_filters=False,
    ),
    "unpartitioned": RocksDBOptions(partitioned_index_and_filters=False),
    "no-bloom": RocksDBOptions(bloom_filter_bits_per_key=0),
    "memtables-outside-cache": RocksDBOptions(memtable_budget=0),
    "cache-256m": RocksDBOptions(block_cache_size=256 * _MIB),
    "zstd-last-level": RocksDBOptions(bottommost_compression="zstd"),
    "no-wal-bound": RocksDBOptions(max_total_wal_size=0),
    "block-16k": RocksDBOptions(block_size=16 * 1024),
}
"""Store options the bench can compare, by name: `default` is `RocksDBOptions()`,
`before` the options the store had before it was tuned for 100M URLs, `lz4` the default
with its blocks compressed (the default before uncompressed blocks were measured faster),
`filters-outside-320m` each file's whole index and filter held outside a smaller cache
(320 MiB, so the store's memory at 100M URLs is about the default's), the others the
default with one choice undone or changed."""


@dataclass(frozen=True, slots=True)
class ScaleSetup:
    populations: tuple[int, ...] = (1_000_000, 10_000_000)
    log: ScaleLogSetup = field(default_factory=ScaleLogSetup)
    step_size: int = 500
    variants: tuple[str, ...] = (DEFAULT,)
    restart: bool = True
    sst_file_bytes: int = SST_FILE_BYTES
    live_bootstrap: str | None = None
    """A broker: also run the live job on each population (`scale_live`)."""
    hold_files: bool = False
    """Also run the default replay with the state's files held in memory (`scale_hold`)."""
    cold_files: bool = False
    """Leave each built state's files out of the page cache (`scale_hold.page_in`)."""
    repeats: int = 1
    """Rounds of the default replays: after the first, each population's again, the
    populations' order reversed from one round to the next (`scale.run_scale_bench`)."""

    def __post_init__(self) -> None:
        if len(self.populations) < 2:
            raise ValueError("--scale needs at least two URL populations to compare")
        if len(set(self.populations)) != len(self.populations):
            raise ValueError(f"URL populations repeat: {self.populations}")
        fetchable = unfetched_count(min(self.populations))
        if self.log.events > fetchable:
            raise ValueError(
                f"{min(self.populations):,} URLs in state leave {fetchable:,} to fetch: "
                f"--events at most {fetchable:,}"
            )
        if self.step_size < 1:
            raise ValueError(f"--step-size must be >= 1, got {self.step_size}")
        if self.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {self.repeats}")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or DEFAULT not in self.variants:
            raise ValueError(
                f"--scale-variants: {DEFAULT} and any of {', '.join(VARIANTS)}; "
                f"got {', '.join(self.variants)}"
            )
        if len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants repeat: {self.variants}")
        steps = -(-self.log.events // self.step_size)
        if self.restart and steps < 2 * REPLAY_COMMIT_EVERY:
            raise ValueError(
                f"the restart needs a log of at least {2 * REPLAY_COMMIT_EVERY} steps "
                f"(--events >= {2 * REPLAY_COMMIT_EVERY} x --step-size), or --no-restart"
            )

    @property
    def kill_at(self) -> int:
        """The step in whose commit interval the killed run dies: half way through the
        log, three steps past a commit (so a restart redoes three steps)."""
        steps = -(-self.log.events // self.step_size)
        middle = steps // 2 // REPLAY_COMMIT_EVERY * REPLAY_COMMIT_EVERY
        return middle + min(3, REPLAY_COMMIT_EVERY - 1)
