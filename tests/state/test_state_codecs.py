"""Tests of the state encodings: one error type for every state value, one position-token
format for every source's resume token and sink's position."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frontierflow.connectors.kafka import decode_offsets, encode_offsets
from frontierflow.connectors.logs import FileSink
from frontierflow.state.ieca import IecaDistance, decode_ieca, encode_ieca
from frontierflow.state.lafc import LafcState, decode_lafc, encode_lafc
from frontierflow.state.pagerank import RankedUrl, decode_ranked, encode_ranked
from frontierflow.state.score import ScoredUrl, decode_scored, encode_scored
from frontierflow.state.storage.codec import (
    StateCodecError,
    decode_i32,
    decode_positions,
    encode_i32,
    encode_positions,
)

# --- i32 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00\x00\x00\x00"),
        (3, b"\x00\x00\x00\x03"),
        (-1, b"\xff\xff\xff\xff"),
        (2**31 - 1, b"\x7f\xff\xff\xff"),
        (-(2**31), b"\x80\x00\x00\x00"),
    ],
)
def test_i32_is_big_endian_twos_complement(value: int, encoded: bytes) -> None:
    assert encode_i32(value) == encoded
    assert decode_i32(encoded) == value


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_i32_rejects_out_of_range(value: int) -> None:
    with pytest.raises(StateCodecError, match="signed 32-bit"):
        encode_i32(value)


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x01", b"\x00" * 5])
def test_i32_rejects_wrong_length(data: bytes) -> None:
    with pytest.raises(StateCodecError, match="needs 4 bytes"):
        decode_i32(data)


# --- position tokens ---------------------------------------------------------------------


def test_position_token_is_big_endian_u64s_in_order() -> None:
    token = encode_positions([1, 258])
    assert token == b"\x00" * 7 + b"\x01" + b"\x00" * 6 + b"\x01\x02"
    assert decode_positions(token) == (1, 258)
    assert encode_positions([]) == b""
    assert decode_positions(b"") == ()


@pytest.mark.parametrize("size", [1, 7, 9, 15])
def test_position_token_of_broken_length_is_a_state_codec_error(size: int) -> None:
    with pytest.raises(StateCodecError, match=f"corrupt input token: {size} bytes"):
        decode_positions(b"\x00" * size, "input token")


def test_position_token_rejects_negative_positions() -> None:
    with pytest.raises(StateCodecError, match="unsigned 64-bit"):
        encode_positions([0, -1])


def test_kafka_checkpoint_is_partition_offset_pairs_in_partition_order() -> None:
    token = encode_offsets({2: 7, 0: 5})
    # worked out: (0, 5) then (2, 7), each number 8 bytes big-endian
    assert token == b"".join(n.to_bytes(8, "big") for n in (0, 5, 2, 7))
    assert decode_offsets(token) == {0: 5, 2: 7}
    assert decode_offsets(None) == {} == decode_offsets(b"")


@pytest.mark.parametrize(
    "token",
    [
        b"\x00" * 12,  # not whole positions
        encode_positions([0, 5, 1]),  # a partition without an offset
        encode_positions([2**31, 5]),  # a partition id beyond int32
        encode_positions([1, 5, 0, 7]),  # partitions out of order
        encode_positions([1, 5, 1, 7]),  # a partition twice
    ],
)
def test_corrupt_kafka_checkpoint_is_a_state_codec_error(token: bytes) -> None:
    with pytest.raises(StateCodecError, match="Kafka checkpoint"):
        decode_offsets(token)


def test_file_sink_position_is_the_file_sizes(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "out.jsonl", tmp_path / "dead.jsonl", decisions=tmp_path / "d.jsonl")
    sink.rewind(None)
    (tmp_path / "out.jsonl").write_bytes(b"0123456789")  # 10 bytes written behind its back
    assert decode_positions(sink.flush()) == (10, 0, 0)
    sink.rewind(encode_positions([4, 0]))  # an older two-file position: decisions cut to 0
    sink.close()
    assert (tmp_path / "out.jsonl").read_bytes() == b"0123"


@pytest.mark.parametrize(
    ("token", "match"),
    [
        (b"\x00" * 20, "corrupt FileSink position: 20 bytes"),
        (encode_positions([1]), "1 file sizes"),
        (encode_positions([1, 2, 3, 4]), "4 file sizes"),
    ],
)
def test_corrupt_file_sink_position_is_a_state_codec_error(
    tmp_path: Path, token: bytes, match: str
) -> None:
    sink = FileSink(tmp_path / "out.jsonl", tmp_path / "dead.jsonl")
    with pytest.raises(StateCodecError, match=match):
        sink.rewind(token)


# --- strategy states: truncated or garbage bytes are StateCodecError -----------------------

CODECS: list[tuple[str, Callable[[Any], bytes], Callable[[bytes], Any], Any]] = [
    ("ieca", encode_ieca, decode_ieca, IecaDistance(2.5, 3)),
    ("score", encode_scored, decode_scored, ScoredUrl(0.25, 1, 2)),
    ("pagerank", encode_ranked, decode_ranked, RankedUrl(0.5, 1, True, ("https://a.org/",))),
    ("lafc", encode_lafc, decode_lafc, LafcState(None, 0.5, 1, 10, -1, 2)),
]


@pytest.mark.parametrize(("name", "encode", "decode", "state"), CODECS, ids=[c[0] for c in CODECS])
def test_state_round_trips(
    name: str, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any], state: Any
) -> None:
    assert decode(encode(state)) == state


@pytest.mark.parametrize(("name", "encode", "decode", "state"), CODECS, ids=[c[0] for c in CODECS])
def test_truncated_state_is_a_state_codec_error(
    name: str, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any], state: Any
) -> None:
    data = encode(state)
    for size in (0, 1, 11):
        with pytest.raises(StateCodecError):
            decode(data[:size])


@pytest.mark.parametrize(
    ("decode", "garbage"),
    [
        (decode_ieca, b"\x01" * 13),  # one byte too many
        (decode_scored, b"\x01" * 14),  # neither 12 nor 16 bytes
        (decode_ranked, b"\x00" * 12 + b"\x02"),  # a ranked flag of 2
        (decode_ranked, b"\x00" * 13 + b"\xff"),  # outlinks that are not UTF-8
        (decode_lafc, b"\x07" + b"\x00" * 12),  # LAFC version 7
    ],
)
def test_garbage_state_is_a_state_codec_error(
    decode: Callable[[bytes], Any], garbage: bytes
) -> None:
    with pytest.raises(StateCodecError):
        decode(garbage)


def test_state_codec_error_is_a_value_error() -> None:
    # callers that caught ValueError from struct before still catch it
    assert issubclass(StateCodecError, ValueError)
