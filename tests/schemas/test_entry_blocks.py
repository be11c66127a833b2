"""The compiled FrontierEntry encoder writes exactly fastavro's bytes, in readable blocks."""

from __future__ import annotations

import io
import math

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontierflow.schemas.codecs import CodecError, load_schema
from frontierflow.schemas.container import container_sync, read_container, start_container
from frontierflow.schemas.entry_blocks import (
    FrontierEntryEncoder,
    avro_long,
    container_block,
    write_entry_block,
)
from frontierflow.schemas.records import FrontierEntry


def fastavro_body(entry: FrontierEntry) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, load_schema("FrontierEntry"), entry.to_avro())
    return buffer.getvalue()


def entry(**fields: object) -> FrontierEntry:
    values: dict[str, object] = {
        "url": "https://a.example/x",
        "host": "a.example",
        "priority": -1.25,
        "strategy": "ieca",
        "crawl_id": "c",
        "cycle": 0,
        "via": "https://a.example/",
        "emitted_at": 1_700_000_000_000,
        "echo": {"ieca.d": "1.25"},
    }
    values.update(fields)
    return FrontierEntry(**values)  # type: ignore[arg-type]


EDGE_CASES = [
    entry(),
    entry(via=None),
    entry(echo={}),
    entry(echo={"a": "", "ümlaut": "ß" * 70, "lafc.t": "3"}),
    entry(url="https://ex.example/" + "p" * 9000, host="ex.example"),  # a 2-byte length
    entry(url="https://bücher.example/straße", host="bücher.example"),
    entry(priority=math.inf),
    entry(priority=-0.0),
    entry(priority=0),  # an int where a double goes
    entry(cycle=2**31 - 1, emitted_at=0),
    entry(cycle=-(2**31), emitted_at=-1),
    entry(emitted_at=2**63 - 1, crawl_id="", strategy=""),
    entry(emitted_at=-(2**63)),
]


@pytest.mark.parametrize("case", EDGE_CASES)
def test_bodies_equal_fastavro(case: FrontierEntry) -> None:
    assert FrontierEntryEncoder().bodies([case]) == [fastavro_body(case)]


def test_repeated_parts_stay_per_entry() -> None:
    """Entries that share a via, time and crawl, and entries that do not, in one block."""
    cases = [
        entry(url=f"https://h{i % 3}.example/{i}", via=None if i % 4 == 0 else f"https://v/{i % 2}")
        for i in range(12)
    ] + [entry(cycle=1), entry(crawl_id="other"), entry(emitted_at=5)]
    assert FrontierEntryEncoder().bodies(cases) == [fastavro_body(c) for c in cases]


text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.builds(
            FrontierEntry,
            url=text,
            host=text,
            priority=st.floats(allow_nan=False),
            strategy=st.sampled_from(["ieca", "bfs", "x" * 70]),
            crawl_id=text,
            cycle=st.integers(-(2**31), 2**31 - 1),
            via=st.none() | text,
            emitted_at=st.integers(-(2**63), 2**63 - 1),
            echo=st.dictionaries(text, text, max_size=3),
        ),
        max_size=8,
    )
)
def test_any_entries_equal_fastavro(entries: list[FrontierEntry]) -> None:
    assert FrontierEntryEncoder().bodies(entries) == [fastavro_body(e) for e in entries]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
    ],
)
def test_avro_long_is_the_specs_zigzag_varint(value: int, expected: bytes) -> None:
    """The Avro spec's examples: 0 → 00, -1 → 01, 1 → 02, 64 → 80 01; -65 zig-zags to 129."""
    assert avro_long(value) == expected


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (entry(cycle=2**31), "does not fit an Avro int"),
        (entry(emitted_at=2**63), "does not fit an Avro long"),
        (entry(url="https://a.example/\ud800"), "UnicodeEncodeError"),
        (entry(priority="high"), "error"),
        (entry(echo={"k": 3}), "AttributeError"),
    ],
)
def test_what_the_schema_cannot_hold_is_a_codec_error(bad: FrontierEntry, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        FrontierEntryEncoder().bodies([entry(), bad])


def test_blocks_after_a_header_read_back_as_a_container() -> None:
    first, second = EDGE_CASES[:5], EDGE_CASES[5:]
    handle = io.BytesIO()
    sync = start_container(handle, "FrontierEntry")
    encoder = FrontierEntryEncoder()
    assert write_entry_block(handle, encoder, first, sync) == len(first)
    assert write_entry_block(handle, encoder, [], sync) == 0
    size = len(handle.getvalue())
    assert container_sync(handle) == sync  # what a sink reopening the file reads back
    handle.seek(size)
    write_entry_block(handle, encoder, second, sync)
    handle.seek(0)
    read = [FrontierEntry.from_avro(r) for r in read_container(handle, "FrontierEntry")]
    assert read == first + second


def test_a_block_is_count_size_records_sync() -> None:
    sync = bytes(range(16))
    assert container_block([b"ab", b"c"], sync) == b"\x04\x06abc" + sync
