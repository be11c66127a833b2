"""The store format: every new store records its version, a directory written by release
0.1.0 (format 1, no version key) is migrated on open and resumes, a newer one is refused."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from rocksdict import AccessType, Options, Rdict

from frontierflow.pipelines.cli import main
from frontierflow.state.storage.codec import encode_i32, encode_positions, encode_u64
from frontierflow.state.storage.format import STORE_FORMAT_KEY, StoreFormatError
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.store import META_FAMILY

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "state-v1"
FAMILIES = ("ieca", "crawled", "speed")
FORMAT_2 = b"\x00\x00\x00\x00\x00\x00\x00\x02"


def _open_raw(path: Path, read_only: bool = True) -> Rdict:
    """A RocksDB directory opened without a store (so without migrating)."""
    options = Options(raw_mode=True)
    names = [n for n in Rdict.list_cf(str(path), options) if n != "default"]
    access = AccessType.read_only() if read_only else AccessType.read_write()
    return Rdict(
        str(path), options, column_families={n: options for n in names}, access_type=access
    )


def _raw(path: Path) -> dict[str, dict[bytes, bytes]]:
    """Every family of a RocksDB directory as it is on disk."""
    db = _open_raw(path)
    try:
        names = [n for n in Rdict.list_cf(str(path), Options(raw_mode=True)) if n != "default"]
        return {n: dict(db.get_column_family(n).items()) for n in names}
    finally:
        db.close()


def _write_format_1(path: Path, meta: dict[bytes, bytes], crawled: dict[bytes, bytes]) -> None:
    """A directory as release 0.1.0 left it: these values and no version key."""
    with RocksDBStore(path, FAMILIES) as store, store.transaction() as tx:
        tx.delete(META_FAMILY, STORE_FORMAT_KEY)
        tx.put_many(META_FAMILY, meta.items())
        tx.put_many("crawled", crawled.items())
        tx.put("ieca", b"https://a.org/", b"\x01" * 12)
        tx.put("speed", b"f1", b"\x01\x02")


# --- the version key --------------------------------------------------------------------


def test_new_rocksdb_store_records_the_format(tmp_path: Path) -> None:
    with RocksDBStore(tmp_path / "db", FAMILIES) as store:
        assert store.get(META_FAMILY, STORE_FORMAT_KEY) == FORMAT_2
    with RocksDBStore(tmp_path / "db", FAMILIES) as store:  # reopened: nothing to do
        assert dict(store.items(META_FAMILY)) == {STORE_FORMAT_KEY: FORMAT_2}


def test_new_memory_store_records_the_format() -> None:
    with InMemoryStore(FAMILIES) as store:
        assert dict(store.items(META_FAMILY)) == {STORE_FORMAT_KEY: FORMAT_2}


@pytest.mark.parametrize(
    ("version", "match"),
    [
        (encode_u64(3), "store format 3 was written by a newer frontierflow"),
        (encode_u64(1), "unknown store format 1"),
        (b"\x02", "unreadable store format"),
    ],
)
def test_unknown_format_is_refused_and_left_alone(
    tmp_path: Path, version: bytes, match: str
) -> None:
    path = tmp_path / "db"
    with RocksDBStore(path, FAMILIES) as store, store.transaction() as tx:
        tx.put(META_FAMILY, STORE_FORMAT_KEY, version)
        tx.put("crawled", b"https://a.org/", b"\x00\x00\x00\x07")
    with pytest.raises(StoreFormatError, match=match):
        RocksDBStore(path, FAMILIES)
    assert _raw(path)["crawled"] == {b"https://a.org/": b"\x00\x00\x00\x07"}
    # the refused store let go of the directory: it opens for writing
    db = _open_raw(path, read_only=False)
    db.get_column_family(META_FAMILY)[STORE_FORMAT_KEY] = FORMAT_2
    db.close()
    with RocksDBStore(path, FAMILIES) as store:
        assert store.get("crawled", b"https://a.org/") == b"\x00\x00\x00\x07"


# --- format 1 → 2 -----------------------------------------------------------------------


def test_format_1_directory_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "db"
    kafka_v1 = struct.pack("<I", 2) + struct.pack("<iq", 0, 5) + struct.pack("<iq", 3, 7)
    _write_format_1(
        path,
        meta={
            b"crawled/c1": b"\x1e" + b"\x00" * 7,  # <Q 30
            b"input.position": kafka_v1,
            b"output.position": b"",  # the Kafka sink's
            b"note": b"\x01\x00",  # not the engine's: left as it is
        },
        crawled={b"https://a.org/": b"\x03\x00\x00\x00", b"https://b.org/": b"\xff" * 4},
    )
    RocksDBStore(path, ("ieca",)).close()  # families not named are migrated too
    assert _raw(path)["meta"] == {
        b"crawled/c1": b"\x00" * 7 + b"\x1e",
        b"input.position": encode_positions([0, 5, 3, 7]),
        b"output.position": b"",
        b"note": b"\x01\x00",
        STORE_FORMAT_KEY: FORMAT_2,
    }
    assert _raw(path)["crawled"] == {
        b"https://a.org/": b"\x00\x00\x00\x03",
        b"https://b.org/": b"\xff" * 4,  # -1 reads the same both ways
    }
    with RocksDBStore(path, FAMILIES) as store:
        assert store.get("ieca", b"https://a.org/") == b"\x01" * 12  # strategy state as it was
        assert store.get("speed", b"f1") == b"\x01\x02"
        assert store.get("crawled", b"https://a.org/") == encode_i32(3)


def test_format_1_file_positions_are_migrated(tmp_path: Path) -> None:
    path = tmp_path / "db"
    _write_format_1(
        path,
        meta={
            b"input.position": struct.pack("<Q", 30),
            b"output.position": struct.pack("<QQQ", 21997, 0, 254),
        },
        crawled={},
    )
    RocksDBStore(path, FAMILIES).close()
    meta = _raw(path)["meta"]
    assert meta[b"input.position"] == encode_u64(30)
    assert meta[b"output.position"] == encode_positions([21997, 0, 254])


@pytest.mark.parametrize(
    ("family", "key", "value"),
    [
        ("crawled", b"https://a.org/", b"\x03\x00\x00"),
        ("meta", b"crawled/c1", b"\x1e"),
        ("meta", b"input.position", b"\x02\x00\x00\x00" + b"\x00" * 12),  # says 2, holds 1
        ("meta", b"output.position", b"\x00" * 12),
    ],
)
def test_corrupt_format_1_directory_is_refused_unchanged(
    tmp_path: Path, family: str, key: bytes, value: bytes
) -> None:
    path = tmp_path / "db"
    crawled = {b"https://b.org/": b"\x03\x00\x00\x00"}
    meta = {b"crawled/c0": b"\x1e" + b"\x00" * 7}
    (crawled if family == "crawled" else meta)[key] = value
    _write_format_1(path, meta=meta, crawled=crawled)
    with pytest.raises(StoreFormatError, match="format-1"):
        RocksDBStore(path, FAMILIES)
    raw = _raw(path)  # one batch: nothing was half migrated
    assert raw["crawled"] == crawled
    assert raw["meta"] == meta


# --- the directory written by release 0.1.0 -----------------------------------------------


def _replay(workdir: Path, monkeypatch: pytest.MonkeyPatch, state: str) -> None:
    monkeypatch.chdir(workdir)  # relative paths, as the fixture was made: dead letters name it
    args = ["replay", "crawl.jsonl", "--strategy", "ieca", "--state-dir", state]
    assert main([*args, "--out", "frontier.jsonl", "--budget", "100", "--step-size", "10"]) == 0


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _latest_per_url(path: Path) -> dict[str, dict[str, Any]]:
    """The latest entry per URL, with the fields added since release 0.1.0 at their schema
    defaults (an old file lacks them)."""
    return {entry["url"]: {"not_before": None, **entry} for entry in _records(path)}


def _sorted(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.fixture
def release_0_1_0(tmp_path: Path) -> Path:
    """A copy of the fixture directory (tests/data is never written)."""
    copy = tmp_path / "state-v1-copy"
    shutil.copytree(FIXTURE, copy)
    return copy


def test_release_0_1_0_directory_opens_as_format_2(release_0_1_0: Path) -> None:
    before = _raw(release_0_1_0 / "state")
    assert STORE_FORMAT_KEY not in before["meta"]
    RocksDBStore(release_0_1_0 / "state", FAMILIES).close()
    after = _raw(release_0_1_0 / "state")
    # by hand from the fixture's README: 30 lines replayed, 30 distinct pages, the files
    # were 21997 (frontier), 0 (dead letters) and 254 (decisions) bytes long
    assert after["meta"] == {
        b"crawled/bench": encode_u64(30),
        b"input.position": encode_u64(30),
        b"output.position": encode_positions([21997, 0, 254]),
        STORE_FORMAT_KEY: FORMAT_2,
    }
    assert (release_0_1_0 / "frontier.jsonl").stat().st_size == 21997
    assert after["ieca"] == before["ieca"]
    assert after["speed"] == before["speed"]
    assert len(after["crawled"]) == 30
    assert after["crawled"] == {url: encode_i32(0) for url in before["crawled"]}


def test_release_0_1_0_directory_resumes_to_the_uninterrupted_outputs(
    release_0_1_0: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed_decisions = _records(release_0_1_0 / "frontier.jsonl.decisions.jsonl")
    _replay(release_0_1_0, monkeypatch, "state")
    out = release_0_1_0 / "frontier.jsonl"
    assert _latest_per_url(out) == _latest_per_url(release_0_1_0 / "expected-frontier.jsonl")
    assert _sorted(_records(release_0_1_0 / "frontier.jsonl.dead-letters.jsonl")) == _sorted(
        _records(release_0_1_0 / "expected-dead-letters.jsonl")
    )
    # The fixture replayed a *finished* 30-line log, whose end closed the speed window and
    # committed its decision (30 pages); an uninterrupted run decides that window once, over
    # 60 pages. What a resume can keep is the committed decision, untouched by the rewind.
    decisions = _records(release_0_1_0 / "frontier.jsonl.decisions.jsonl")
    assert decisions[: len(committed_decisions)] == committed_decisions
    assert committed_decisions[0]["pages"] == 30


def test_fresh_run_gives_the_release_0_1_0_outputs(
    release_0_1_0: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for output in release_0_1_0.glob("frontier.jsonl*"):  # the fixture's half-way outputs
        output.unlink()
    _replay(release_0_1_0, monkeypatch, "fresh-state")
    expected = release_0_1_0 / "expected-frontier.jsonl"
    assert _latest_per_url(release_0_1_0 / "frontier.jsonl") == _latest_per_url(expected)
    for kind in ("dead-letters", "decisions"):
        assert _sorted(_records(release_0_1_0 / f"frontier.jsonl.{kind}.jsonl")) == _sorted(
            _records(release_0_1_0 / f"expected-{kind}.jsonl")
        )
