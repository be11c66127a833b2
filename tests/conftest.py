"""Shared pytest setup, and the helpers several test modules use, as fixtures.

tests/ is not a package; pytest (rootdir-based, "prepend" import mode) puts this folder on
sys.path before importing this conftest, so the plugin modules tests/kafka_broker.py,
tests/beam_runners.py and tests/topical_webs.py are importable by their bare names, also from
the test modules in the subfolders that mirror the source tree (tests/state/,
tests/pipelines/beam/, ...). Each of those folders is put on sys.path too, so test file
basenames must be unique across folders.

Fixtures here (test modules never import each other's private helpers):
- `fetch_events`: the one generator of small FetchEvent logs for replay tests.
- `beam_replay_case`: the IECA log and the readers the Beam-vs-embedded tests compare;
  `beam_files`: its reader of what a Beam replay wrote.
- `kafka_client`: topics, producing, reading back, and the replay a live run must equal.
- `recorded_speed_events`: two fetchers' events from a simulated crawl, delivered late.
"""

from __future__ import annotations

import base64
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from frontierflow.connectors.kafka import KafkaSettings, KafkaTopics, ensure_topics
from frontierflow.connectors.logs import read_fetch_events
from frontierflow.pipelines.beam.io import READ_PARTS
from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.core.step import is_repeat_fetch
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.evaluation.speed import make_controller
from frontierflow.pipelines.evaluation.speedsim import SimSettings, read_trace, simulate_fetcher
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.codecs import AvroCodec
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.storage.rocksdb import RocksDBStore

# Session fixtures: a real Kafka broker (infra/kafka), Beam's runners (infra/prism and
# infra/flink), a standalone Flink session cluster (infra/flink/cluster.sh); and nginx
# serving HTML trees on loopback (infra/debian-docs/serve.sh), per test.
pytest_plugins = ["kafka_broker", "beam_runners", "flink_cluster", "nginx_server"]

FIRST_FETCH_MS = 1_700_000_000_000
KAFKA_DEADLINE_S = 120.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: needs the real broker from infra/kafka")


def make_fetch_events(
    n: int,
    *,
    seed: int,
    pages: int,
    url: str,
    hosts: int,
    max_outlinks: int,
    crawl_id: str = "c",
    fetcher_ids: Sequence[str] = ("f",),
    cycles: Sequence[int] = (0,),
    echo_every: int = 3,
    echo_range: tuple[float, float] = (0.1, 3.0),
    extra_outlinks: Sequence[str] = (),
    sized: bool = False,
) -> list[dict[str, Any]]:
    """`n` FetchEvents (Avro dicts), one page fetched per millisecond.

    Event i fetches a page drawn uniformly from `pages` URLs (`url` formatted with `host`
    = page mod `hosts` and `page`), so pages come back (repeat fetches); its cycle is drawn
    from `cycles` when there are several; it links to a uniform sample of 0 to
    `max_outlinks` - 1 of the pages, then `extra_outlinks`; its echo carries an IECA
    distance from `echo_range` unless i is a multiple of `echo_every`; fetcher i mod
    len(`fetcher_ids`) fetched it; with `sized`, bytes = 1000 + i and fetch_ms = 50.
    The random draws per event are, in order: page, cycle, outlink count and sample, echo.
    """
    rng = random.Random(seed)
    urls = [url.format(host=i % hosts, page=i) for i in range(pages)]
    records = []
    for i in range(n):
        page = urls[rng.randrange(len(urls))]
        cycle = rng.choice(cycles) if len(cycles) > 1 else cycles[0]
        outlinks = [*rng.sample(urls, rng.randrange(0, max_outlinks)), *extra_outlinks]
        echo = {"ieca.d": repr(rng.uniform(*echo_range))} if i % echo_every else {}
        record: dict[str, Any] = {
            "url": page,
            "fetched_at": FIRST_FETCH_MS + i,
            "status": 200,
            "fetcher_id": fetcher_ids[i % len(fetcher_ids)],
            "host": page.split("/")[2],
            "crawl_id": crawl_id,
            "cycle": cycle,
            "outlinks": outlinks,
            "echo": echo,
        }
        if sized:
            record |= {"bytes": 1000 + i, "fetch_ms": 50.0}
        records.append(record)
    return records


@pytest.fixture
def fetch_events() -> Callable[..., list[dict[str, Any]]]:
    """`make_fetch_events`: the test suite's generator of small FetchEvent logs."""
    return make_fetch_events


class BeamReplayCase:
    """The IECA log the Beam-vs-embedded tests replay (500 pages over 29 hosts, a quarter
    of the fetches in cycle 1, a mailto: outlink on every page, one ftp: dead letter, and with
    `deferred` answers a fetcher will ask again inserted), and
    the two sides' outputs read back for comparison."""

    budget = 120  # k = 3: IECA's clock steps every 3 pages, so any clock error shows

    def write_log(
        self, path: Path, events: int = 300, deferred: tuple[int, ...] = ()
    ) -> list[dict[str, Any]]:
        """Write the log to `path`; returns its records, the dead letter at index 50 (or
        last, for a shorter log)."""
        records = make_fetch_events(
            events,
            seed=17,
            pages=500,
            url="https://h{host}.example.com/p/{page}",
            hosts=29,
            max_outlinks=30,
            cycles=(0, 0, 0, 1),
            echo_range=(-0.5, 3.0),
            extra_outlinks=("mailto:x@y.z",),
        )
        records.insert(50, {**records[0], "url": "ftp://not-http/"})
        # answers a fetcher will ask again, each pausing its host for 100 ms (some 100
        # events): neither side may count or route them, both hold the entries of the
        # paused host emitted inside the pause
        for at in deferred:
            if at < len(records):
                records.insert(at, {**records[at], "status": 429, "will_retry": True,
                                    "retry_after_ms": 100, "outlinks": []})  # fmt: skip
        write_container(path, "FetchEvent", records)
        return records

    def embedded(
        self, log: Path, tmp: Path, strategy: str, fill_echo: bool = False
    ) -> tuple[dict, dict]:
        """(latest entry per URL, state per URL) of the embedded engine replaying `log`."""
        out = tmp / "embedded.jsonl"
        replay_log(
            log,
            strategy_name=strategy,
            state_dir=tmp / "state",
            out=out,
            budget=self.budget,
            step_size=37,
            fill_echo=fill_echo,
        )
        latest = {}
        for line in out.read_text().splitlines():
            entry = json.loads(line)
            latest[entry["url"]] = entry
        with RocksDBStore(tmp / "state", (strategy, "crawled")) as store:
            states = {k.decode(): v for k, v in store.items(strategy)}
        return latest, states

    @staticmethod
    def beam_files(prefix: Path) -> tuple[list[str], dict[str, bytes], list[str]]:
        """What a Beam replay wrote under `prefix`: frontier lines, state per URL, dead
        letters."""
        lines: list[str] = []
        states: dict[str, bytes] = {}
        dead: list[str] = []
        for f in prefix.parent.glob(prefix.name + "-frontier*"):
            lines += f.read_text().splitlines()
        for f in prefix.parent.glob(prefix.name + "-state*"):
            for line in f.read_text().splitlines():
                row = json.loads(line)
                states[row["url"]] = base64.b64decode(row["state"])
        for f in prefix.parent.glob(prefix.name + "-dead-letters*"):
            dead += f.read_text().splitlines()
        return lines, states, dead

    def beam(self, prefix: Path) -> tuple[dict, dict, list[str]]:
        """(latest entry per URL, state per URL, dead letters) of a Beam replay."""
        lines, states, dead = self.beam_files(prefix)
        entries = {}
        for line in lines:
            entry = json.loads(line)
            entries[entry["url"]] = entry
        return entries, states, dead

    def check_equal(self, tmp: Path, strategy: str, beam_args: list[str]) -> None:
        """Replay the log with `strategy` on the embedded engine and on Beam with
        `beam_args`; the Beam frontier and states must equal the engine's."""
        log = tmp / "events.avro"
        records = self.write_log(log, deferred=(20, 120, 220))
        data = log.read_bytes()  # each block ends with the header's sync marker, its last 16
        assert data.count(data[-16:]) - 1 > READ_PARTS  # blocks: every part Beam reads has some
        expected, expected_states = self.embedded(log, tmp, strategy)
        prefix = tmp / "beam" / "out"
        prefix.parent.mkdir()
        run_beam_replay(
            log,
            strategy_name=strategy,
            out_prefix=str(prefix),
            budget=self.budget,
            beam_args=beam_args,
        )
        entries, states, dead = self.beam(prefix)
        # the embedded file holds every upsert; a URL fetched after its last entry has a
        # tombstone in Kafka and no entry from Beam: compare the URLs that are still waiting
        last_fetch: dict[str, int] = {}
        last_cycle: dict[str, int] = {}
        for r in records:  # fetches that took effect: repeats in a cycle, deferred answers not
            if r.get("will_retry"):
                continue
            if not is_repeat_fetch(last_cycle.get(r["url"]), r["cycle"]):
                last_cycle[r["url"]] = r["cycle"]
                last_fetch[r["url"]] = r["fetched_at"]
        waiting = {u: e for u, e in expected.items() if e["emitted_at"] > last_fetch.get(u, -1)}
        assert entries == waiting
        assert sum(e["not_before"] is not None for e in waiting.values()) >= 10  # 11 or 12
        assert states == expected_states
        assert len(states) > 400 and len(entries) > 100
        assert [json.loads(d)["error_class"] for d in dead] == ["InvalidEvent"]
        assert len(records) == 304

    def check_log_equal(
        self, log: Path, tmp: Path, strategy: str, beam_args: list[str], fill_echo: bool
    ) -> tuple[dict, dict, list[str], int]:
        """Replay any `log` (a WARC too) on the embedded engine and on Beam; the Beam
        frontier and states must equal the engine's. Returns Beam's (entries, states, dead
        letters) and how many times the pipeline ran."""
        expected, expected_states = self.embedded(log, tmp, strategy, fill_echo)
        prefix = tmp / "beam" / "out"
        prefix.parent.mkdir()
        runs = run_beam_replay(
            log,
            strategy_name=strategy,
            out_prefix=str(prefix),
            budget=self.budget,
            beam_args=beam_args,
            fill_echo=fill_echo,
        )
        entries, states, dead = self.beam(prefix)
        last_fetch: dict[str, int] = {}
        last_cycle: dict[str, int] = {}
        for _, event, _ in read_fetch_events(log):
            if isinstance(event, FetchEvent) and not is_repeat_fetch(
                last_cycle.get(event.url), event.cycle
            ):
                last_cycle[event.url] = event.cycle
                last_fetch[event.url] = event.fetched_at
        waiting = {u: e for u, e in expected.items() if e["emitted_at"] > last_fetch.get(u, -1)}
        assert entries == waiting
        assert states == expected_states
        return entries, states, dead, runs


@pytest.fixture
def beam_replay_case() -> BeamReplayCase:
    return BeamReplayCase()


@pytest.fixture
def beam_files() -> Callable[[Path], tuple[list[str], dict[str, bytes], list[str]]]:
    """`BeamReplayCase.beam_files`: frontier lines, states and dead letters a Beam replay
    wrote under a prefix."""
    return BeamReplayCase.beam_files


class KafkaClient:
    """kafka-python helpers for the live tests: fresh topics, producing, reading a topic
    back to its end, and what `frontierflow replay` gives for the same events."""

    @staticmethod
    def events(n: int, seed: int = 7) -> list[dict[str, Any]]:
        """The live tests' FetchEvents: 700 pages over 23 hosts, three fetchers."""
        return make_fetch_events(
            n,
            seed=seed,
            pages=700,
            url="https://h{host}.example.net/doc/{page}",
            hosts=23,
            max_outlinks=35,
            crawl_id="live",
            fetcher_ids=("f0", "f1", "f2"),
            echo_every=4,
            echo_range=(0.2, 3.0),
            sized=True,
        )

    @staticmethod
    def settings(bootstrap: str, name: str | None = None, **topics: str) -> KafkaSettings:
        """Settings with topics of their own (prefix `name`, else a random one)."""
        prefix = name or uuid.uuid4().hex[:10]
        base = KafkaTopics(
            fetch_events=f"{prefix}-fetch-events",
            frontier=f"{prefix}-frontier",
            fetcher_control=f"{prefix}-control",
            dead_letter=f"{prefix}-dead",
            seeds=f"{prefix}-seeds",
            # the fetchers' `fetched` topic takes the frontier's partition count when it is
            # created: one shared by tests with different counts loses downloads
            fetched=f"{prefix}-fetched",
        )
        fields = {f: topics.get(f, getattr(base, f)) for f in base.__slots__}
        return KafkaSettings(
            bootstrap_servers=bootstrap, topics=KafkaTopics(**fields), group_id=f"g-{prefix}"
        )

    @staticmethod
    def produce(settings: KafkaSettings, values: Iterable[bytes | None]) -> int:
        return KafkaClient.produce_to(settings, settings.topics.fetch_events, values)

    @staticmethod
    def produce_to(settings: KafkaSettings, topic: str, values: Iterable[bytes | None]) -> int:
        """Send `values` (no keys) to `topic`, creating the job's topics first."""
        ensure_topics(settings)
        producer = KafkaProducer(
            bootstrap_servers=settings.bootstrap_servers,
            acks="all",
            max_request_size=4 * 1024 * 1024,
        )
        count = 0
        for value in values:
            producer.send(topic, value=value)
            count += 1
        producer.flush()
        producer.close()
        return count

    @staticmethod
    def avro(records: Iterable[dict[str, Any]]) -> list[bytes]:
        codec = AvroCodec.for_name("FetchEvent")
        return [codec.encode(r) for r in records]

    @staticmethod
    def read_topic(settings: KafkaSettings, topic: str) -> list[tuple[bytes | None, bytes | None]]:
        """Every (key, value) of `topic` from the beginning to its current end."""
        consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers, enable_auto_commit=False
        )
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        out: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + KAFKA_DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.key, r.value) for r in records)
        consumer.close()
        return out

    @staticmethod
    def read_partitions(
        settings: KafkaSettings, topic: str
    ) -> list[tuple[bytes | None, bytes | None, int]]:
        """Every (key, value, partition) of `topic` to its current end, each partition's
        records in order."""
        consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers, enable_auto_commit=False
        )
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        out: list[tuple[bytes | None, bytes | None, int]] = []
        deadline = time.monotonic() + KAFKA_DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for tp, records in consumer.poll(timeout_ms=500).items():
                out.extend((r.key, r.value, tp.partition) for r in records)
        consumer.close()
        return out

    def latest_frontier(self, settings: KafkaSettings) -> dict[str, dict[str, Any]]:
        """What a fetcher rebuilds from the compacted topic: latest value per URL,
        tombstones removing the URL."""
        codec = AvroCodec.for_name("FrontierEntry")
        latest: dict[str, dict[str, Any]] = {}
        for key, value in self.read_topic(settings, settings.topics.frontier):
            assert key is not None
            url = key.decode()
            if value is None:
                latest.pop(url, None)
            else:
                latest[url] = codec.decode(value)
        return latest

    def replayed(
        self, tmp: Path, records: list[dict[str, Any]], *, budget: int, step: int
    ) -> tuple[dict, dict]:
        """(latest frontier, state dump) of `frontierflow replay` over the same events."""
        log = tmp / "events.avro"
        write_container(log, "FetchEvent", records)
        out = tmp / "replay.jsonl"
        replay_log(
            log,
            strategy_name="ieca",
            state_dir=tmp / "replay-state",
            out=out,
            budget=budget,
            step_size=step,
        )
        fetched = {r["url"] for r in records}
        latest: dict[str, dict[str, Any]] = {}
        for line in out.read_text().splitlines():
            entry = json.loads(line)
            latest[entry["url"]] = entry
        for url in fetched:
            latest.pop(url, None)  # the live topic holds a tombstone for a fetched page
        return latest, self.state(tmp / "replay-state", budget=budget)

    @staticmethod
    def state(state_dir: Path, *, budget: int) -> dict[str, dict[bytes, bytes]]:
        """Every IECA state family of `state_dir` but `meta`."""
        families = Engine.families_for(build_strategy("ieca", budget=budget))
        with RocksDBStore(state_dir, families) as store:
            return {f: dict(store.items(f)) for f in families if f != "meta"}

    @staticmethod
    def comparable(entries: dict[str, dict[str, Any]]) -> dict[str, tuple]:
        """The fields of frontier entries that a live run and a replay share."""
        return {
            u: (e["priority"], e["via"], e["emitted_at"], e["echo"], e["host"], e["cycle"])
            for u, e in entries.items()
        }


@pytest.fixture
def kafka_client() -> KafkaClient:
    return KafkaClient()


@pytest.fixture
def recorded_speed_events(tmp_path: Path) -> list[FetchEvent]:
    """Two fetchers' events from a simulated crawl on a 4-step bandwidth trace, delivered
    out of order (up to 12 s late)."""
    trace_file = tmp_path / "recorded" / "trace"
    trace_file.parent.mkdir()
    trace_file.write_text("0 2\n5 0.5\n10 3\n15 1\n")
    _, control = make_controller(settings_for("hypothesis"))
    sim = SimSettings(duration_s=90.0)
    result = simulate_fetcher(read_trace(trace_file), control, 4, sim)  # type: ignore[arg-type]
    events = result.events + [
        replace(e, fetcher_id="f2", fetched_at=e.fetched_at + 3_000) for e in result.events[::3]
    ]
    rng = random.Random(5)
    events.sort(key=lambda e: e.fetched_at + rng.randrange(0, 12_000))
    return events
