"""Tests of the state stores: every behaviour runs on RocksDB and on the in-memory store.

RocksDB-only tests cover what memory cannot do: persistence across reopen and surviving a
`kill -9` of the process between committed steps.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from frontierflow.state.storage.codec import StateCodecError, StructCodec, decode_u64, encode_u64
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.storage.rocksdb import RocksDBOptions, RocksDBStore
from frontierflow.state.storage.store import (
    META_FAMILY,
    StateStore,
    StoreError,
    Transaction,
    with_meta,
)

FAMILIES = ("lafc", "ieca")
StoreFactory = Callable[..., StateStore]


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[StoreFactory]:
    """Builds stores of a kind on `tmp_path` and closes every one at teardown."""
    opened: list[StateStore] = []

    def make(
        kind: str,
        families: Iterable[str] = FAMILIES,
        name: str = "db",
        options: RocksDBOptions | None = None,
    ) -> StateStore:
        store: StateStore
        if kind == "rocksdb":
            store = RocksDBStore(tmp_path / name, families, options)
        else:
            store = InMemoryStore(families)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture(params=["rocksdb", "memory"])
def store(request: pytest.FixtureRequest, store_factory: StoreFactory) -> StateStore:
    return store_factory(request.param)


def commit(store: StateStore, family: str, pairs: dict[bytes, bytes]) -> None:
    tx = store.transaction()
    for key, value in pairs.items():
        tx.put(family, key, value)
    tx.commit()


def skip_unless_rocksdb(store: StateStore) -> None:
    if not isinstance(store, RocksDBStore):
        pytest.skip("the in-memory store keeps nothing across close")


# --- reads and writes ------------------------------------------------------------------


def test_families_always_include_meta(store: StateStore) -> None:
    assert store.families == (META_FAMILY, "lafc", "ieca")


def test_put_get_delete(store: StateStore) -> None:
    commit(store, "lafc", {b"a": b"1", b"b": b"2"})
    assert store.get("lafc", b"a") == b"1"
    assert store.get("ieca", b"a") is None  # families are separate

    tx = store.transaction()
    tx.delete("lafc", b"a")
    tx.delete("lafc", b"never-written")
    tx.put("lafc", b"b", b"22")
    tx.commit()

    assert store.get("lafc", b"a") is None
    assert store.get("lafc", b"b") == b"22"


def test_empty_value_is_not_a_miss(store: StateStore) -> None:
    commit(store, "lafc", {b"k": b""})
    assert store.get("lafc", b"k") == b""
    assert store.get_many("lafc", [b"k", b"x"]) == [b"", None]


def test_get_many_hits_and_misses_in_order(store: StateStore) -> None:
    commit(store, "lafc", {b"a": b"1", b"c": b"3"})
    keys = [b"c", b"missing", b"a", b"c"]
    assert store.get_many("lafc", keys) == [b"3", None, b"1", b"3"]
    assert store.get_many("lafc", []) == []


def test_transaction_get_many_merges_overlay_over_store(store: StateStore) -> None:
    commit(store, "lafc", {b"a": b"1", b"b": b"2", b"c": b"3"})
    tx = store.transaction()
    tx.put("lafc", b"b", b"20")  # overrides a stored value
    tx.delete("lafc", b"c")  # hides a stored value
    tx.put("lafc", b"d", b"40")  # new key

    got = tx.get_many("lafc", [b"a", b"b", b"c", b"d", b"e", b"b"])

    assert got == [b"1", b"20", None, b"40", None, b"20"]


def test_reads_see_own_writes_before_commit(store: StateStore) -> None:
    commit(store, "lafc", {b"k": b"old"})
    tx = store.transaction()
    tx.put("lafc", b"k", b"new")
    tx.put("lafc", b"fresh", b"1")

    assert tx.get("lafc", b"k") == b"new"
    assert tx.get("lafc", b"fresh") == b"1"
    assert store.get("lafc", b"k") == b"old"  # not visible outside until commit
    assert store.get("lafc", b"fresh") is None

    tx.delete("lafc", b"k")
    assert tx.get("lafc", b"k") is None
    tx.put("lafc", b"k", b"again")
    assert tx.get("lafc", b"k") == b"again"


def test_abort_discards_writes(store: StateStore) -> None:
    commit(store, "lafc", {b"kept": b"1"})
    tx = store.transaction()
    tx.put("lafc", b"dropped", b"2")
    tx.delete("lafc", b"kept")
    tx.abort()

    assert store.get("lafc", b"dropped") is None
    assert store.get("lafc", b"kept") == b"1"


def test_commit_lands_state_and_meta_together(store: StateStore) -> None:
    tx = store.transaction()
    tx.put("lafc", b"url-1", b"automaton")
    tx.put("ieca", b"url-1", b"distance")
    tx.put(META_FAMILY, b"input-offset", encode_u64(41))

    assert [store.get(f, k) for f, k in _STEP_KEYS] == [None, None, None]
    tx.commit()
    assert [store.get(f, k) for f, k in _STEP_KEYS] == [
        b"automaton",
        b"distance",
        encode_u64(41),
    ]


_STEP_KEYS = [("lafc", b"url-1"), ("ieca", b"url-1"), (META_FAMILY, b"input-offset")]


def test_items_in_bytewise_key_order(store: StateStore) -> None:
    keys = [b"b", b"a\x00", b"", b"\xff", b"a", b"\x00", b"ab", b"a\xff"]
    commit(store, "lafc", {key: key + b"!" for key in keys})
    commit(store, "ieca", {b"other": b"family"})

    assert list(store.items("lafc")) == [(key, key + b"!") for key in sorted(keys)]


def test_binary_keys_and_values_with_nul_bytes(store: StateStore) -> None:
    pairs = {b"\x00": b"\x00\x00", b"a\x00b": b"\x00v\x00", b"\x00\xff\x00": bytes(range(256))}
    commit(store, "lafc", pairs)

    assert store.get_many("lafc", list(pairs)) == list(pairs.values())
    assert store.get("lafc", b"a") is None  # no truncation at the NUL
    assert dict(store.items("lafc")) == pairs


def test_many_keys_in_one_commit(store: StateStore) -> None:
    rng = random.Random(7)
    pairs = {rng.randbytes(12): i.to_bytes(4, "big") for i in range(10_000)}
    tx = store.transaction()
    for key, value in pairs.items():
        tx.put("lafc", key, value)
    tx.put(META_FAMILY, b"step", encode_u64(1))
    tx.commit()

    items = list(store.items("lafc"))  # RocksDB reads these in several chunks
    assert items == sorted(pairs.items())
    sample = rng.sample(list(pairs), 500)
    assert store.get_many("lafc", sample) == [pairs[key] for key in sample]


def test_transaction_context_manager_commits_or_aborts(store: StateStore) -> None:
    tx = store.transaction()
    with tx:
        tx.put("lafc", b"ok", b"1")
    assert store.get("lafc", b"ok") == b"1"

    failing = store.transaction()
    with pytest.raises(KeyError), failing:
        failing.put("lafc", b"bad", b"1")
        raise KeyError("operator failed")
    assert store.get("lafc", b"bad") is None


# --- guards ----------------------------------------------------------------------------


TX_CALLS: dict[str, Callable[[Transaction], object]] = {
    "get": lambda tx: tx.get("lafc", b"k"),
    "get_many": lambda tx: tx.get_many("lafc", [b"k"]),
    "put": lambda tx: tx.put("lafc", b"k", b"v"),
    "delete": lambda tx: tx.delete("lafc", b"k"),
    "commit": lambda tx: tx.commit(),
    "abort": lambda tx: tx.abort(),
}


@pytest.mark.parametrize("ending", ["committed", "aborted"])
@pytest.mark.parametrize("call", list(TX_CALLS))
def test_finished_transaction_refuses_use(store: StateStore, ending: str, call: str) -> None:
    tx = store.transaction()
    tx.put("lafc", b"k", b"v")
    tx.commit() if ending == "committed" else tx.abort()

    with pytest.raises(StoreError, match=f"transaction is {ending}"):
        TX_CALLS[call](tx)


@pytest.mark.parametrize("call", ["get", "get_many", "put", "delete"])
def test_transaction_unknown_family(store: StateStore, call: str) -> None:
    tx = store.transaction()
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: tx.get("nope", b"k"),
        "get_many": lambda: tx.get_many("nope", [b"k"]),
        "put": lambda: tx.put("nope", b"k", b"v"),
        "delete": lambda: tx.delete("nope", b"k"),
    }
    with pytest.raises(StoreError, match="unknown family 'nope'"):
        calls[call]()


@pytest.mark.parametrize("call", ["get", "get_many", "items"])
def test_store_unknown_family(store: StateStore, call: str) -> None:
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: store.get("nope", b"k"),
        "get_many": lambda: store.get_many("nope", [b"k"]),
        "items": lambda: store.items("nope"),  # raises on the call, not on iteration
    }
    with pytest.raises(StoreError, match="unknown family 'nope'"):
        calls[call]()


@pytest.mark.parametrize("call", ["get", "get_many", "items", "transaction"])
def test_closed_store_refuses_use(store: StateStore, call: str) -> None:
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: store.get("lafc", b"k"),
        "get_many": lambda: store.get_many("lafc", [b"k"]),
        "items": lambda: store.items("lafc"),
        "transaction": store.transaction,
    }
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="is closed"):
        calls[call]()


def test_commit_after_close_fails_and_ends_transaction(store: StateStore) -> None:
    tx = store.transaction()
    tx.put("lafc", b"k", b"v")
    store.close()

    with pytest.raises(StoreError, match="is closed"):
        tx.commit()
    with pytest.raises(StoreError, match="transaction is failed"):
        tx.put("lafc", b"k", b"v")


@pytest.mark.parametrize(("key", "value"), [("text", b"v"), (b"k", "text"), (b"k", None)])
def test_keys_and_values_must_be_bytes(store: StateStore, key: Any, value: Any) -> None:
    tx = store.transaction()
    with pytest.raises(TypeError, match="must be bytes"):
        tx.put("lafc", key, value)


def test_with_meta_puts_meta_first_without_repeats() -> None:
    assert with_meta(["a", "meta", "b", "a"]) == ("meta", "a", "b")


# --- RocksDB persistence ---------------------------------------------------------------


def test_reopen_keeps_committed_data_and_adds_families(
    store: StateStore, store_factory: StoreFactory
) -> None:
    skip_unless_rocksdb(store)
    commit(store, "lafc", {b"a": b"1"})
    commit(store, META_FAMILY, {b"offset": encode_u64(9)})
    store.close()

    # A family the directory lacks is created; one it has but we do not name is kept.
    reopened = store_factory("rocksdb", families=["ieca", "forager"])
    assert reopened.families == (META_FAMILY, "ieca", "forager")
    assert reopened.get(META_FAMILY, b"offset") == encode_u64(9)
    commit(reopened, "forager", {b"f": b"2"})
    reopened.close()

    again = store_factory("rocksdb", families=["lafc", "forager"])
    assert again.get("lafc", b"a") == b"1"
    assert again.get("forager", b"f") == b"2"


def test_items_iterator_survives_interleaved_close(store: StateStore) -> None:
    skip_unless_rocksdb(store)
    commit(store, "lafc", {i.to_bytes(4, "big"): b"v" for i in range(3000)})
    items = store.items("lafc")
    first = next(items)
    store.close()

    assert first == ((0).to_bytes(4, "big"), b"v")
    with pytest.raises(StoreError, match="is closed"):
        list(items)  # the next chunk needs the store


def test_sync_writes_store_commits(store_factory: StoreFactory) -> None:
    options = RocksDBOptions(
        sync_writes=True, compression="none", bloom_filter_bits_per_key=0, memtable_bloom_ratio=0
    )
    store = store_factory("rocksdb", options=options)
    commit(store, "lafc", {b"k": b"v"})
    assert store.get("lafc", b"k") == b"v"


def test_memtable_bloom_filter_answers_present_and_absent_keys(
    store_factory: StoreFactory,
) -> None:
    store = store_factory("rocksdb", options=RocksDBOptions(memtable_bloom_ratio=0.25))
    written = {f"https://example.org/{i}".encode(): i.to_bytes(4, "big") for i in range(0, 2000, 2)}
    commit(store, "lafc", written)
    asked = [f"https://example.org/{i}".encode() for i in range(2000)]
    assert store.get_many("lafc", asked) == [written.get(key) for key in asked]
    with pytest.raises(ValueError, match="memtable_bloom_ratio"):
        RocksDBOptions(memtable_bloom_ratio=0.5)


@pytest.mark.parametrize(
    "field",
    ["write_buffer_size", "max_write_buffer_number", "block_cache_size", "max_open_files"],
)
def test_rocksdb_options_reject_invalid_values(field: str) -> None:
    invalid: dict[str, Any] = {field: 0}
    with pytest.raises(ValueError, match=field):
        RocksDBOptions(**invalid)


_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from frontierflow.state.storage.rocksdb import RocksDBStore

    store = RocksDBStore(sys.argv[1], ["lafc"])
    step = store.transaction()
    step.put("lafc", b"url-1", b"state-1")
    step.put("meta", b"input-offset", b"\\x00" * 7 + b"\\x01")
    step.commit()
    pending = store.transaction()
    pending.put("lafc", b"url-2", b"state-2")
    pending.put("meta", b"input-offset", b"\\x00" * 7 + b"\\x02")
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_committed_batch_survives_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "killed"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(path)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()

    with RocksDBStore(path, ["lafc"]) as store:  # no clean close happened: WAL replay
        assert store.get("lafc", b"url-1") == b"state-1"
        assert store.get(META_FAMILY, b"input-offset") == encode_u64(1)
        assert store.get("lafc", b"url-2") is None  # buffered, never committed


# --- codecs ----------------------------------------------------------------------------


def test_struct_codec_round_trip() -> None:
    codec = StructCodec("<dQI")
    assert codec.size == 20
    assert codec.decode(codec.encode((0.25, 2**64 - 1, 7))) == (0.25, 2**64 - 1, 7)


@pytest.mark.parametrize("data", [b"", b"\x00" * 19, b"\x00" * 21])
def test_struct_codec_rejects_wrong_length(data: bytes) -> None:
    with pytest.raises(StateCodecError, match="needs 20 bytes"):
        StructCodec("<dQI").decode(data)


@pytest.mark.parametrize("fmt", ["dQ", "@dQ", "=dQ", "<z"])
def test_struct_codec_rejects_unportable_or_invalid_formats(fmt: str) -> None:
    with pytest.raises(StateCodecError, match="format"):
        StructCodec(fmt)


@pytest.mark.parametrize("values", [(1.0,), (1.0, -1), (1.0, "x"), 5])
def test_struct_codec_rejects_bad_values(values: Any) -> None:
    with pytest.raises(StateCodecError, match="cannot encode"):
        StructCodec("<dQ").encode(values)


def test_u64_round_trip_and_order() -> None:
    numbers = [0, 1, 255, 256, 2**32, 2**64 - 1]
    encoded = [encode_u64(n) for n in numbers]
    assert [decode_u64(e) for e in encoded] == numbers
    assert sorted(encoded) == encoded  # bytewise order is numeric order
    assert encode_u64(1) == b"\x00\x00\x00\x00\x00\x00\x00\x01"


@pytest.mark.parametrize("value", [-1, 2**64])
def test_u64_rejects_out_of_range(value: int) -> None:
    with pytest.raises(StateCodecError, match="unsigned 64-bit"):
        encode_u64(value)


def test_u64_rejects_wrong_length() -> None:
    with pytest.raises(StateCodecError, match="needs 8 bytes, got 7"):
        decode_u64(b"\x00" * 7)


def test_put_many_writes_and_deletes_in_one_go(store: StateStore) -> None:
    with store.transaction() as tx:
        tx.put("ieca", b"gone", b"x")
    tx = store.transaction()
    tx.put_many("ieca", [(b"a", b"1"), (b"b", b"2"), (b"gone", None)])
    assert tx.get_many("ieca", [b"a", b"b", b"gone"]) == [b"1", b"2", None]
    tx.commit()
    assert store.get_many("ieca", [b"a", b"b", b"gone"]) == [b"1", b"2", None]


def test_put_many_refuses_non_bytes(store: StateStore) -> None:
    tx = store.transaction()
    with pytest.raises(TypeError):
        tx.put_many("ieca", [("text", b"1")])  # type: ignore[list-item]


def test_estimate_keys_counts_committed_keys(store: StateStore) -> None:
    with store.transaction() as tx:
        tx.put_many("ieca", [(b"k%d" % i, b"v") for i in range(100)])
    estimate = store.estimate_keys("ieca")
    assert 50 <= estimate <= 150  # RocksDB estimates; the in-memory store is exact
    if isinstance(store, InMemoryStore):
        assert estimate == 100
