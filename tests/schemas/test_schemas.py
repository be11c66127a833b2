"""Tests of the Avro wire contract: schemas, single-object/Confluent/container/JSON-lines codecs.

Round trips for every record kind in every encoding, fingerprints checked against the Avro
spec's vectors with an independent bit-by-bit CRC-64-AVRO, schema evolution across versions,
and every way bad input must end as a `CodecError`.
"""

from __future__ import annotations

import dataclasses
import io
import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontierflow.schemas.codecs import (
    RECORD_TYPES,
    SCHEMA_NAMES,
    AvroCodec,
    CodecError,
    ConfluentCodec,
    WireRecord,
    canonical_form,
    decode_record,
    encode_record,
    load_schema,
    record_from_dict,
    schema_fingerprint,
)
from frontierflow.schemas.container import (
    container_log,
    container_log_part,
    iter_log_from,
    read_container,
    read_log,
    write_container,
)
from frontierflow.schemas.entry_blocks import FrontierEntryEncoder
from frontierflow.schemas.jsonl import json_to_record, record_to_json
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierEntry,
    ScalingDecision,
    SeedRequest,
)

# --- sample records -------------------------------------------------------------------------

T0 = 1_700_000_000_123

FETCH_FULL = FetchEvent(
    url="https://exämple.org/grüße?q=日本",
    fetched_at=T0,
    status=200,
    fetcher_id="fetcher-1",
    host="exämple.org",
    via="https://exämple.org/",
    crawl_id="crawl-7",
    cycle=3,
    outlinks=tuple(f"https://exämple.org/p/{i}" for i in range(5_000)),
    terms={"naïve": 3, "日本": 2**40, "": 0},
    text="Grüße 😀\nzweite Zeile",
    content_hash="ab12cd",
    published_at=T0 - 86_400_000,
    bytes=123_456,
    fetch_ms=12.5,
    echo={"ieca.distance": "1.25", "lafc.pushed_at": str(T0)},
)
FETCH_MINIMAL = FetchEvent(
    url="https://a.example/", fetched_at=0, status=-3, fetcher_id="f", host="a.example"
)
FRONTIER = FrontierEntry(
    url="https://b.example/x",
    host="b.example",
    priority=0.75,
    strategy="ieca",
    crawl_id="default",
    cycle=0,
    via=None,
    emitted_at=T0,
)
FRONTIER_ECHO = dataclasses.replace(FRONTIER, via="https://b.example/", echo={"d": "2.0"})
SCALING = ScalingDecision(
    fetcher_id="fetcher-1",
    window_start=T0 - 60_000,
    window_end=T0,
    pages=120,
    crawl_speed=2.0,
    speed_mean=1.8,
    speed_stddev=0.25,
    e_cs=-1.2,
    e_cs_sign=-1,
    threads_before=8,
    threads_after=6,
    learning=False,
    reason="speed below the learned mean",
)
DEAD_KAFKA = DeadLetter(
    source="fetch-events",
    partition=3,
    offset=2**40,
    error_class="CodecError",
    message="bad bytes for FetchEvent: ü",
    raw=bytes(range(256)),
    at=T0,
)
DEAD_FILE = DeadLetter(
    source="logs/crawl.jsonl",
    partition=None,
    offset=None,
    error_class="CodecError",
    message="not valid JSON",
    raw=b"",
    at=T0,
)
SAMPLES = [
    pytest.param(FETCH_FULL, id="fetch-full"),
    pytest.param(FETCH_MINIMAL, id="fetch-minimal"),
    pytest.param(FRONTIER, id="frontier"),
    pytest.param(FRONTIER_ECHO, id="frontier-echo"),
    pytest.param(SCALING, id="scaling"),
    pytest.param(DEAD_KAFKA, id="dead-kafka"),
    pytest.param(DEAD_FILE, id="dead-file"),
    pytest.param(SeedRequest("https://example.org/", T0, "c", 2), id="seed"),
]
MINIMAL_JSON = '{"url":"u","fetched_at":1,"status":200,"fetcher_id":"f","host":"h"}'


def _codec(sample: WireRecord) -> AvroCodec:
    return AvroCodec.for_name(type(sample).__name__)


def _fetch_json(**changes: Any) -> str:
    record = json.loads(MINIMAL_JSON)
    record.update(changes)
    return json.dumps({k: v for k, v in record.items() if v is not ...})


# --- the schemas match records.py -----------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_matches_dataclass_field_for_field(name: str) -> None:
    schema = load_schema(name)
    fields = [field.name for field in dataclasses.fields(RECORD_TYPES[name])]
    assert [field["name"] for field in schema["fields"]] == fields
    assert schema["name"] == f"frontierflow.v1.{name}"
    assert schema["doc"]
    assert all(field.get("doc") for field in schema["fields"])


def test_schemas_and_codecs_are_parsed_once() -> None:
    assert load_schema("FetchEvent") is load_schema("FetchEvent")
    assert AvroCodec.for_name("FetchEvent") is AvroCodec.for_name("FetchEvent")


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES)
def test_single_object_round_trip(sample: WireRecord) -> None:
    codec = _codec(sample)
    decoded = codec.decode(codec.encode(sample.to_avro()))
    assert decoded == sample.to_avro()
    assert type(sample).from_avro(decoded) == sample
    assert decode_record(type(sample), encode_record(sample)) == sample


@pytest.mark.parametrize("sample", SAMPLES)
def test_confluent_round_trip(sample: WireRecord) -> None:
    codec = ConfluentCodec(42, type(sample).__name__)
    data = codec.encode(sample.to_avro())
    assert data[:5] == b"\x00\x00\x00\x00\x2a"
    assert type(sample).from_avro(codec.decode(data)) == sample


@pytest.mark.parametrize("container_codec", ["null", "deflate"])
@pytest.mark.parametrize("sample", SAMPLES)
def test_container_round_trip(sample: WireRecord, container_codec: str, tmp_path: Path) -> None:
    path = tmp_path / "log.avro"
    written = write_container(path, type(sample), [sample.to_avro()] * 3, codec=container_codec)
    assert written == 3
    assert [type(sample).from_avro(r) for r in read_container(path)] == [sample] * 3
    buffer = io.BytesIO(path.read_bytes())
    assert list(read_container(buffer, type(sample))) == [sample.to_avro()] * 3


@pytest.mark.parametrize("sample", SAMPLES)
def test_json_lines_round_trip(sample: WireRecord) -> None:
    line = record_to_json(sample.to_avro(), type(sample))
    assert "\n" not in line
    record = json_to_record(line, type(sample))
    assert record == sample.to_avro()
    assert record_from_dict(type(sample), record) == sample
    assert json_to_record(line.encode("utf-8"), type(sample).__name__) == record


def test_json_bytes_are_latin1_text() -> None:
    line = record_to_json(DEAD_KAFKA.to_avro(), DeadLetter)
    assert json.loads(line)["raw"] == bytes(range(256)).decode("latin-1")


def test_hand_written_json_gets_schema_defaults() -> None:
    record = json_to_record(MINIMAL_JSON, FetchEvent)
    assert record_from_dict(FetchEvent, record) == FetchEvent(
        url="u", fetched_at=1, status=200, fetcher_id="f", host="h"
    )
    record["echo"]["mutated"] = "yes"
    assert json_to_record(MINIMAL_JSON, FetchEvent)["echo"] == {}


def test_hand_written_json_int_becomes_double() -> None:
    record = json_to_record(_fetch_json(fetch_ms=12), FetchEvent)
    assert record["fetch_ms"] == 12.0
    assert isinstance(record["fetch_ms"], float)


def test_container_append_and_timestamps_as_millis(tmp_path: Path) -> None:
    path = tmp_path / "log.avro"
    write_container(path, FrontierEntry, [FRONTIER.to_avro()])
    write_container(path, FrontierEntry, [FRONTIER_ECHO.to_avro()], append=True)
    records = list(read_container(path))
    assert [FrontierEntry.from_avro(r) for r in records] == [FRONTIER, FRONTIER_ECHO]
    assert records[0]["emitted_at"] == T0


# --- fingerprints ---------------------------------------------------------------------------

CRC64_AVRO_EMPTY = 0xC15D213AA4D7A795


def slow_crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO one bit at a time, straight from the spec's definition (no table)."""
    fingerprint = CRC64_AVRO_EMPTY
    for byte in data:
        fingerprint ^= byte
        for _ in range(8):
            low_bit = fingerprint & 1
            fingerprint >>= 1
            if low_bit:
                fingerprint ^= CRC64_AVRO_EMPTY
    return fingerprint


# Vectors from the Avro project's share/test/data/schema-tests.txt (signed Java longs).
SPEC_VECTORS = [
    ('"null"', '"null"', 7195948357588979594),
    ('"int"', '"int"', 8247732601305521295),
    ('"string"', '"string"', -8142146995180207161),
    (
        '{"fields":[], "type":"record", "name":"foo", "doc":"Useful info"}',
        '{"name":"foo","type":"record","fields":[]}',
        -4824392279771201922,
    ),
]


@pytest.mark.parametrize(("schema", "canonical", "expected"), SPEC_VECTORS)
def test_fingerprint_matches_spec_vectors(schema: str, canonical: str, expected: int) -> None:
    assert canonical_form(json.loads(schema)) == canonical
    assert slow_crc64_avro(canonical.encode()) == expected % 2**64
    assert schema_fingerprint(json.loads(schema)) == expected.to_bytes(8, "little", signed=True)


@pytest.mark.parametrize("sample", SAMPLES)
def test_header_is_magic_plus_fingerprint(sample: WireRecord) -> None:
    form = canonical_form(load_schema(type(sample).__name__))
    assert "doc" not in form
    assert "logicalType" not in form
    expected = b"\xc3\x01" + slow_crc64_avro(form.encode()).to_bytes(8, "little")
    assert _codec(sample).encode(sample.to_avro())[:10] == expected
    assert _codec(sample).header == expected


def test_fingerprint_ignores_docs_but_not_fields() -> None:
    raw = _raw_fetch_event_schema()
    raw["doc"] = "another doc"
    raw["fields"][0]["doc"] = "changed"
    assert schema_fingerprint(raw) == schema_fingerprint(load_schema("FetchEvent"))
    assert schema_fingerprint(_fetch_event_v2()) != schema_fingerprint(raw)


# --- evolution ------------------------------------------------------------------------------


def _raw_fetch_event_schema() -> dict[str, Any]:
    text = resources.files("frontierflow.schemas").joinpath("fetch_event.avsc").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _fetch_event_v2() -> dict[str, Any]:
    """FetchEvent as a later version could look: two new fields, both with defaults."""
    schema = _raw_fetch_event_schema()
    schema["fields"] += [
        {"name": "language", "type": ["null", "string"], "default": None, "doc": "ISO 639-1."},
        {"name": "hops", "type": "int", "default": -1, "doc": "Link hops from a seed."},
    ]
    return schema


def test_newer_reader_resolves_current_writer() -> None:
    writer, reader = AvroCodec("FetchEvent"), AvroCodec(_fetch_event_v2())
    data = writer.encode(FETCH_FULL.to_avro())
    with pytest.raises(CodecError, match="unknown schema fingerprint 0x"):
        reader.decode(data)
    assert reader.register_writer(load_schema("FetchEvent")) == writer.fingerprint
    decoded = reader.decode(data)
    assert decoded == {**FETCH_FULL.to_avro(), "language": None, "hops": -1}


def test_older_reader_rejects_unregistered_newer_writer() -> None:
    reader, writer = AvroCodec("FetchEvent"), AvroCodec(_fetch_event_v2())
    data = writer.encode({**FETCH_MINIMAL.to_avro(), "language": "de", "hops": 2})
    expected = int.from_bytes(writer.fingerprint, "little")
    with pytest.raises(CodecError, match=f"unknown schema fingerprint 0x{expected:016x}"):
        reader.decode(data)
    reader.register_writer(_fetch_event_v2())
    assert FetchEvent.from_avro(reader.decode(data)) == FETCH_MINIMAL


def test_incompatible_writers_are_refused_at_registration() -> None:
    codec = AvroCodec("FetchEvent")
    with pytest.raises(CodecError, match=r"is not 'frontierflow\.v1\.FetchEvent'"):
        codec.register_writer("FrontierEntry")
    strict_v2 = _fetch_event_v2()
    del strict_v2["fields"][-1]["default"]
    with pytest.raises(CodecError, match="lacks field 'hops'"):
        AvroCodec(strict_v2).register_writer("FetchEvent")


def test_container_of_newer_version_reads_into_current(tmp_path: Path) -> None:
    path = tmp_path / "v2.avro"
    with path.open("wb") as handle:
        record = {**FETCH_MINIMAL.to_avro(), "language": "de", "hops": 2}
        fastavro.writer(handle, fastavro.parse_schema(_fetch_event_v2()), [record])
    assert [FetchEvent.from_avro(r) for r in read_container(path)] == [FETCH_MINIMAL]


# --- bad input ------------------------------------------------------------------------------


@pytest.fixture
def fetch_bytes() -> bytes:
    return AvroCodec.for_name("FetchEvent").encode(FETCH_FULL.to_avro())


def test_every_truncation_is_a_codec_error(fetch_bytes: bytes) -> None:
    codec = AvroCodec.for_name("FetchEvent")
    cuts = [*range(0, 40), *range(40, len(fetch_bytes), 997), len(fetch_bytes) - 1]
    for cut in cuts:
        with pytest.raises(CodecError, match=r"bad bytes|wrong magic"):
            codec.decode(fetch_bytes[:cut])


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda data: b"\xc3\x02" + data[2:], "wrong magic 'c302'"),
        (lambda data: b"\x00" + data[1:], "wrong magic"),
        (lambda data: data[:2] + bytes(8) + data[10:], "unknown schema fingerprint 0x0{16}"),
        (lambda data: data[:5], "truncated single-object header"),
        (lambda data: data + b"\x00", "1 trailing bytes"),
        (lambda data: data[:10] + b"\xff" * 40, "bad bytes for frontierflow.v1.FetchEvent"),
        (lambda data: b"", "empty message"),
    ],
)
def test_bad_single_object_bytes(fetch_bytes: bytes, mangle: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        AvroCodec.for_name("FetchEvent").decode(mangle(fetch_bytes))


def test_codec_error_is_raised_from_fastavro_cause(fetch_bytes: bytes) -> None:
    with pytest.raises(CodecError, match="EOFError") as caught:
        decode_record(FetchEvent, fetch_bytes[:-3])
    assert isinstance(caught.value.__cause__, EOFError)
    assert isinstance(caught.value, ValueError)


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(CodecError, match="expected bytes, got str"):
        AvroCodec.for_name("FetchEvent").decode("text")


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_body_is_a_record_or_a_codec_error(body: bytes) -> None:
    codec = AvroCodec.for_name("FrontierEntry")
    try:
        record = codec.decode(codec.header + body)
    except CodecError:
        return
    assert codec.decode(codec.encode(record)) == record


def test_confluent_wrong_magic_and_id() -> None:
    codec = ConfluentCodec(7, "FrontierEntry")
    data = codec.encode(FRONTIER.to_avro())
    with pytest.raises(CodecError, match="wrong magic 'c3'"):
        codec.decode(encode_record(FRONTIER))
    with pytest.raises(CodecError, match="unknown schema id 8"):
        codec.decode(b"\x00\x00\x00\x00\x08" + data[5:])
    codec.register_writer(8, "FrontierEntry")
    assert codec.decode(b"\x00\x00\x00\x00\x08" + data[5:]) == FRONTIER.to_avro()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({k: v for k, v in FETCH_MINIMAL.to_avro().items() if k != "url"}, "missing field 'url'"),
        ({**FETCH_MINIMAL.to_avro(), "status": "200"}, "integer is required on field status"),
        ({**FETCH_MINIMAL.to_avro(), "status": 2**31}, "status=2147483648 is out of the int"),
        ({**FETCH_MINIMAL.to_avro(), "via": 5}, "via"),
        ({**FETCH_MINIMAL.to_avro(), "outlinks": [1]}, "outlinks"),
        ([1, 2], "expected a dict, got list"),
    ],
)
def test_encode_rejects_bad_records(record: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        AvroCodec.for_name("FetchEvent").encode(record)


def test_encode_validate_catches_what_the_writer_lets_through() -> None:
    record = {**SCALING.to_avro(), "learning": "yes"}
    AvroCodec.for_name("ScalingDecision").encode(record)  # fastavro writes it as True
    with pytest.raises(CodecError, match=r"invalid frontierflow\.v1\.ScalingDecision"):
        AvroCodec.for_name("ScalingDecision").encode(record, validate=True)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"url": "u",', "not valid JSON"),
        (b"\xff\xfe\xfd", "not valid JSON"),
        ("", "not valid JSON"),
        ('{"url":"u","fetched_at":1,"status":200,"fetch_ms":NaN}', "NaN is not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (_fetch_json(url=...), "missing field 'url'"),
        (_fetch_json(status="200"), r"invalid .*FetchEvent.*status"),
        (_fetch_json(status=True), "field 'status': a boolean"),
        (_fetch_json(fetched_at=1.5), r"invalid .*FetchEvent.*fetched_at"),
        (_fetch_json(outlinks="https://x/"), r"invalid .*FetchEvent.*outlinks"),
        (_fetch_json(terms={"a": 1.5}), r"invalid .*FetchEvent.*terms"),
        (_fetch_json(echo={"a": 1}), r"invalid .*FetchEvent.*echo"),
        (_fetch_json(cycle=2**31), r"invalid .*FetchEvent.*cycle"),
        (_fetch_json(outlink=[]), r"unknown field\(s\) \['outlink'\]"),
    ],
)
def test_bad_json_lines(line: str | bytes, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        json_to_record(line, FetchEvent)


def test_json_unknown_fields_allowed_on_request() -> None:
    record = json_to_record(_fetch_json(language="de"), FetchEvent, allow_unknown=True)
    assert "language" not in record


def test_json_bytes_must_be_latin1() -> None:
    line = record_to_json(DEAD_FILE.to_avro(), DeadLetter).replace('"raw":""', '"raw":"€"')
    with pytest.raises(CodecError, match="bytes must be latin-1"):
        json_to_record(line, DeadLetter)


def test_record_to_json_rejects_nan_and_bad_types() -> None:
    with pytest.raises(CodecError, match="not representable as JSON"):
        record_to_json({**SCALING.to_avro(), "e_cs": float("nan")}, ScalingDecision)
    with pytest.raises(CodecError, match=r"invalid frontierflow\.v1\.ScalingDecision"):
        record_to_json({**SCALING.to_avro(), "pages": "many"}, ScalingDecision)


def test_record_from_dict_names_the_missing_field() -> None:
    with pytest.raises(CodecError, match="missing field 'url' in FetchEvent"):
        record_from_dict(FetchEvent, {"fetched_at": 1})


def test_unknown_kind() -> None:
    with pytest.raises(CodecError, match="unknown record kind 'Page'"):
        json_to_record(MINIMAL_JSON, "Page")


def test_container_write_errors(tmp_path: Path) -> None:
    bad = {**FETCH_MINIMAL.to_avro(), "status": "x"}
    with pytest.raises(CodecError, match="at record 1"):
        write_container(tmp_path / "a.avro", FetchEvent, [FETCH_MINIMAL.to_avro(), bad])
    with pytest.raises(CodecError, match="container codec 'snappy'"):
        write_container(tmp_path / "b.avro", FetchEvent, [], codec="snappy")


def test_corrupt_containers(tmp_path: Path) -> None:
    path = tmp_path / "log.avro"
    write_container(path, FetchEvent, [FETCH_FULL.to_avro(), FETCH_MINIMAL.to_avro()])
    data = path.read_bytes()
    cases = {
        data[:-10]: "truncated container|sync marker mismatch",
        data[:-16] + bytes(16): "sync marker mismatch",
        b"PK\x03\x04" + data[4:]: "not an Avro container file",
        data[:6]: "corrupt container header",
    }
    for broken, message in cases.items():
        with pytest.raises(CodecError, match=message):
            list(read_container(io.BytesIO(broken)))


# --- logs -----------------------------------------------------------------------------------


def test_read_log_json_lines_yields_errors_as_items(tmp_path: Path) -> None:
    good = record_to_json(FETCH_MINIMAL.to_avro(), FetchEvent)
    lines = [good, "", "{oops", good, '{"fetched_at": 1}', "   ", good]
    path = tmp_path / "log.jsonl"
    path.write_bytes("\n".join(lines).encode() + b"\r\n" + MINIMAL_JSON.encode())
    items = list(read_log(path, FetchEvent))
    assert [position for position, _, _ in items] == [0, 2, 3, 4, 6, 7]
    kinds = [type(item).__name__ for _, item, _ in items]
    assert kinds == ["dict", "CodecError", "dict", "CodecError", "dict", "dict"]
    assert items[1][2] == b"{oops"
    assert "missing field 'url'" in str(items[3][1])
    assert items[4][2] == good.encode()
    assert [p for p, _, _ in iter_log_from(path, FetchEvent, 3)] == [3, 4, 6, 7]


def _many_events(count: int) -> list[dict[str, Any]]:
    outlinks = tuple(f"https://example.org/{j}" for j in range(30))
    events = [
        FetchEvent(f"https://example.org/{i}", T0 + i, 200, "f", "example.org", outlinks=outlinks)
        for i in range(count)
    ]
    return [event.to_avro() for event in events]


def _first_block_data(data: bytes) -> tuple[int, int]:
    """(start, size) of the first block's data, found by hand from the container layout."""
    start = data.index(data[-16:]) + 16  # the header ends with the sync marker

    def varint(position: int) -> tuple[int, int]:
        value = shift = 0
        while data[position] & 0x80:
            value |= (data[position] & 0x7F) << shift
            shift, position = shift + 7, position + 1
        value |= data[position] << shift
        return (value >> 1) ^ -(value & 1), position + 1

    _, position = varint(start)
    size, position = varint(position)
    return position, size


def test_read_log_container_positions_raw_and_restart(tmp_path: Path) -> None:
    records = _many_events(300)
    path = tmp_path / "log.avro"
    write_container(path, FetchEvent, records)
    items = list(read_log(path, FetchEvent))
    assert [position for position, _, _ in items] == list(range(300))
    assert [item for _, item, _ in items] == records
    codec = AvroCodec.for_name("FetchEvent")
    assert codec.decode(codec.header + items[17][2]) == records[17]
    assert [item for _, item, _ in iter_log_from(path, FetchEvent, 250)] == records[250:]
    assert list(iter_log_from(path, FetchEvent, 300)) == []


def test_container_bad_block_is_one_item_and_skipped_on_restart(tmp_path: Path) -> None:
    records = _many_events(300)
    path = tmp_path / "log.avro"
    write_container(path, FetchEvent, records, codec="deflate")
    data = bytearray(path.read_bytes())
    start, size = _first_block_data(bytes(data))
    data[start : start + size] = b"\xff" * size
    path.write_bytes(bytes(data))
    items = list(read_log(path, FetchEvent))
    position, error, _ = items[0]
    assert position == 0
    assert isinstance(error, CodecError)
    assert "corrupt container block" in str(error)
    assert [item for _, item, _ in items[1:]] == records[items[1][0] :]
    resumed = list(iter_log_from(path, FetchEvent, items[1][0]))
    assert [item for _, item, _ in resumed] == records[items[1][0] :]


def test_truncated_container_log_ends_with_an_error_item(tmp_path: Path) -> None:
    path = tmp_path / "log.avro"
    write_container(path, FetchEvent, _many_events(300))
    path.write_bytes(path.read_bytes()[:-100])
    items = list(read_log(path, FetchEvent))
    *good, (position, error, raw) = items
    assert all(isinstance(item, dict) for _, item, _ in good)
    assert isinstance(error, CodecError)
    assert position == len(good)
    assert raw == b""


def test_container_of_another_kind_is_one_error_item(tmp_path: Path) -> None:
    path = tmp_path / "log.avro"
    write_container(path, FrontierEntry, [FRONTIER.to_avro()])
    [(position, error, _)] = list(read_log(path, FetchEvent))
    assert position == 0
    assert isinstance(error, CodecError)
    assert "is not 'frontierflow.v1.FetchEvent'" in str(error)


def _small_blocks(path: Path, records: list[dict[str, Any]]) -> list[int]:
    """Write `records` as a container of blocks of about 2 kB (a few records each); returns
    where each block's sync marker starts, found by hand from the layout."""
    with path.open("wb") as handle:
        fastavro.writer(handle, load_schema("FetchEvent"), records, sync_interval=2_000)
    data = path.read_bytes()
    sync = data[-16:]  # every block, the last one too, ends with the file's sync marker
    header_end = data.index(sync) + 16
    markers = []
    at = data.find(sync, header_end)
    while at != -1:
        markers.append(at)
        at = data.find(sync, at + 16)
    return markers


def _parts(path: Path, parts: int) -> list[list[Any]]:
    result = []
    for part in range(parts):
        with path.open("rb") as handle:
            result.append(list(container_log_part(handle, "FetchEvent", part, parts)))
    return result


def _whole(path: Path) -> list[Any]:
    with path.open("rb") as handle:
        return list(container_log(handle, "FetchEvent", 0))


def test_container_parts_together_are_the_whole_log(tmp_path: Path) -> None:
    records = _many_events(300)
    path = tmp_path / "log.avro"
    blocks = len(_small_blocks(path, records))
    assert blocks >= 20  # each of the 4 parts gets several blocks
    parts = _parts(path, 4)
    assert all(parts)
    union = sorted(item for part in parts for item in part)
    assert union == _whole(path)
    assert [position for position, _, _ in union] == list(range(300))
    assert [item for _, item, _ in union] == records
    # one part is the whole log; parts are block-aligned runs of positions
    assert _parts(path, 1) == [_whole(path)]
    assert [position for position, _, _ in parts[0]][:1] == [0]


def test_container_broken_frame_is_one_error_over_the_parts(tmp_path: Path) -> None:
    records = _many_events(300)
    path = tmp_path / "log.avro"
    markers = _small_blocks(path, records)
    data = bytearray(path.read_bytes())
    data[markers[5] : markers[5] + 16] = bytes(16)  # block 5's sync marker: part 5 % 4 = 1
    path.write_bytes(bytes(data))
    whole = _whole(path)
    *good, (broken_at, error, _) = whole
    assert isinstance(error, CodecError)
    assert "sync marker mismatch" in str(error)
    assert [position for position, _, _ in good] == list(range(broken_at))
    assert 5 <= broken_at < 300 - 20
    parts = _parts(path, 4)
    errors = [
        (number, position)
        for number, part in enumerate(parts)
        for position, item, _ in part
        if isinstance(item, CodecError)
    ]
    assert errors == [(1, broken_at)]
    assert max(position for part in parts for position, _, _ in part) == broken_at
    union = sorted((item for part in parts for item in part), key=lambda item: item[0])
    assert union[:-1] == good
    assert union[-1][0] == broken_at
    assert str(union[-1][1]) == str(error)


def test_container_bad_header_is_part_zeros_error(tmp_path: Path) -> None:
    path = tmp_path / "log.avro"
    _small_blocks(path, _many_events(30))
    path.write_bytes(b"PK\x03\x04" + path.read_bytes()[4:])
    parts = _parts(path, 3)
    assert [len(part) for part in parts] == [1, 0, 0]
    [(position, error, _)] = parts[0]
    assert position == 0
    assert isinstance(error, CodecError)
    assert "not an Avro container file" in str(error)
    with pytest.raises(ValueError, match=r"part must be in 0\.\.2, got 3 of 3"):
        container_log_part(io.BytesIO(), "FetchEvent", 3, 3)


# --- property -------------------------------------------------------------------------------

_texts = st.text(max_size=30)
_ints = st.integers(-(2**31), 2**31 - 1)
_longs = st.integers(-(2**63), 2**63 - 1)

fetch_events = st.builds(
    FetchEvent,
    url=_texts,
    fetched_at=_longs,
    status=_ints,
    fetcher_id=_texts,
    host=_texts,
    via=st.none() | _texts,
    crawl_id=_texts,
    cycle=_ints,
    outlinks=st.lists(_texts, max_size=40).map(tuple),
    terms=st.none() | st.dictionaries(_texts, _longs, max_size=8),
    text=st.none() | st.text(max_size=200),
    content_hash=st.none() | _texts,
    published_at=st.none() | _longs,
    bytes=_longs,
    fetch_ms=st.floats(allow_nan=False, allow_infinity=False),
    echo=st.dictionaries(_texts, _texts, max_size=8),
    retry_after_ms=st.none() | _longs,
    crawl_delay_ms=st.none() | _longs,
    failure=st.none() | _texts,
    will_retry=st.booleans(),
    depth=st.none() | _ints,
)


@given(fetch_events)
@settings(max_examples=200, deadline=None)
def test_fetch_event_round_trips_in_every_encoding(event: FetchEvent) -> None:
    assert decode_record(FetchEvent, encode_record(event)) == event
    line = record_to_json(event.to_avro(), FetchEvent)
    assert record_from_dict(FetchEvent, json_to_record(line, FetchEvent)) == event
    buffer = io.BytesIO()
    write_container(buffer, FetchEvent, [event.to_avro()], codec="deflate")
    buffer.seek(0)
    assert [FetchEvent.from_avro(r) for r in read_container(buffer)] == [event]


_PUSHBACK_FIELDS = {
    "FetchEvent": ("retry_after_ms", "crawl_delay_ms", "failure", "will_retry", "depth"),
    "FrontierEntry": ("not_before",),
}


def _before_pushback(name: str) -> dict[str, Any]:
    """`name`'s schema as it was before the host rule's fields were added."""
    file = {"FetchEvent": "fetch_event.avsc", "FrontierEntry": "frontier_entry.avsc"}[name]
    text = resources.files("frontierflow.schemas").joinpath(file).read_text()
    schema: dict[str, Any] = json.loads(text)
    schema["fields"] = [f for f in schema["fields"] if f["name"] not in _PUSHBACK_FIELDS[name]]
    return schema


def test_pushback_fields_evolve_both_ways() -> None:
    # an old producer's FetchEvent reads with the new fields at their defaults
    old_event, new_event = AvroCodec(_before_pushback("FetchEvent")), AvroCodec("FetchEvent")
    old = {k: v for k, v in FETCH_FULL.to_avro().items() if k not in _PUSHBACK_FIELDS["FetchEvent"]}
    new_event.register_writer(_before_pushback("FetchEvent"))
    read = FetchEvent.from_avro(new_event.decode(old_event.encode(old)))
    assert (read.retry_after_ms, read.crawl_delay_ms, read.failure, read.will_retry) == (
        None,
        None,
        None,
        False,
    )
    assert read.depth is None
    # a new producer's FetchEvent reads in an old consumer, the new fields dropped
    pushed = replace(FETCH_FULL, status=429, retry_after_ms=15_000, will_retry=True, depth=3)
    old_event.register_writer("FetchEvent")
    assert old_event.decode(new_event.encode(pushed.to_avro())) == {
        **old,
        "status": 429,
    }
    # the same for a FrontierEntry's not_before, through the hand-written block encoder too
    entry = FrontierEntry("http://a.test/", "a.test", 1.0, "bfs", "c", 0, None, 5, {}, 16_000)
    old_entry, new_entry = AvroCodec(_before_pushback("FrontierEntry")), AvroCodec("FrontierEntry")
    old_entry.register_writer("FrontierEntry")
    assert "not_before" not in old_entry.decode(new_entry.encode(entry.to_avro()))
    new_entry.register_writer(_before_pushback("FrontierEntry"))
    unheld = {k: v for k, v in entry.to_avro().items() if k != "not_before"}
    assert FrontierEntry.from_avro(new_entry.decode(old_entry.encode(unheld))).not_before is None
    body = FrontierEntryEncoder().bodies([entry])[0]
    assert body == new_entry.encode(entry.to_avro())[10:]  # the header is 10 bytes
