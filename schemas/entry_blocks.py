"""FrontierEntries straight into Avro container blocks, with the record layout compiled once.

A frontier file gets up to one FrontierEntry per changed URL per step, so its writer is on
the engine's hot path. fastavro's writer takes one dict per record and walks the schema for
each (about 4 µs a record here); this encoder reads the entries' attributes and joins their
Avro binary fields in the schema's field order (`frontier_entry.avsc`), with what repeats
within a block encoded once: a step's strategy, crawl and cycle, a parent's URL (`via`), an
event's time, an echo key. Its bytes equal fastavro's record for record (tested on every
field's edge cases); container headers are still fastavro's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import IO, Final

from frontierflow.schemas.codecs import AvroCodec, CodecError, codec_error
from frontierflow.schemas.records import FrontierEntry

_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1
_ENCODE_ERRORS: Final = (AttributeError, TypeError, ValueError, OverflowError, struct.error)


def avro_long(value: int) -> bytes:
    """An Avro int or long: zig-zag, then a base-128 varint, low groups first (Avro spec)."""
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise CodecError(f"{value} does not fit an Avro long")
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SIZES: Final = tuple(avro_long(n) for n in range(1 << 13))
"""The varint of every length up to 8,191 bytes: a string's length prefix is one lookup."""


def _sized(data: bytes) -> bytes:
    """An Avro string or bytes value: its length, then the bytes."""
    size = len(data)
    return (_SIZES[size] if size < 8192 else avro_long(size)) + data


def _int(value: int) -> bytes:
    if type(value) is not int or not _INT_MIN <= value <= _INT_MAX:
        raise CodecError(f"{value!r} does not fit an Avro int")
    return avro_long(value)


def _long(value: int) -> bytes:
    if type(value) is not int:
        raise CodecError(f"{value!r} is not an Avro long")
    return avro_long(value)


_pack_double: Final = struct.Struct("<d").pack


class FrontierEntryEncoder:
    """The Avro binary body of FrontierEntries, in the field order of the schema:
    url, host, priority, strategy, crawl_id, cycle, via (union null|string), emitted_at
    (timestamp-millis as a long), echo (map of strings, one block then its end), not_before
    (union null|timestamp-millis).

    The parts that repeat within a block are kept in small dicts that `bodies` starts
    empty, so memory stays bounded by one block (hosts, parents, times, echo keys); a run
    of entries of one strategy, crawl and cycle (a step's, mostly) encodes those once."""

    def bodies(self, entries: Iterable[FrontierEntry]) -> list[bytes]:
        """One encoded record per entry, in order; CodecError for an entry the schema
        cannot hold (a wrong type, a number out of range, text that is not UTF-8)."""
        sizes, pack, sized = _SIZES, _pack_double, _sized
        middle = b""
        middle_of: tuple[str | None, str | None, int] = (None, None, 0)  # the last encoded
        vias: dict[str | None, bytes] = {None: b"\x00"}
        times: dict[int, bytes] = {}
        keys: dict[str, bytes] = {}
        hosts: dict[str, bytes] = {}
        out: list[bytes] = []
        append = out.append
        entry: FrontierEntry | None = None
        try:
            for entry in entries:
                url = entry.url.encode()
                host = hosts.get(entry.host)
                if host is None:
                    host = hosts[entry.host] = sized(entry.host.encode())
                strategy, crawl_id, cycle = entry.strategy, entry.crawl_id, entry.cycle
                if (
                    strategy is not middle_of[0]
                    or crawl_id is not middle_of[1]
                    or cycle != middle_of[2]
                ):
                    middle = sized(strategy.encode()) + sized(crawl_id.encode()) + _int(cycle)
                    middle_of = (strategy, crawl_id, cycle)
                via = vias.get(entry.via)
                if via is None:
                    parent = entry.via or ""  # not None: None is in `vias` from the start
                    via = vias[entry.via] = b"\x02" + sized(parent.encode())
                emitted = times.get(entry.emitted_at)
                if emitted is None:
                    emitted = times[entry.emitted_at] = _long(entry.emitted_at)
                parts = [
                    sizes[len(url)] if len(url) < 8192 else avro_long(len(url)),
                    url,
                    host,
                    pack(entry.priority),
                    middle,
                    via,
                    emitted,
                ]
                echo = entry.echo
                if echo:  # one block of len(echo) pairs, then the empty block that ends it
                    parts.append(sizes[len(echo)] if len(echo) < 8192 else avro_long(len(echo)))
                    for name, value in echo.items():
                        key = keys.get(name)
                        if key is None:
                            key = keys[name] = sized(name.encode())
                        text = value.encode()
                        parts += (
                            key,
                            sizes[len(text)] if len(text) < 8192 else avro_long(len(text)),
                            text,
                        )
                parts.append(b"\x00")
                not_before = entry.not_before
                parts.append(b"\x00" if not_before is None else b"\x02" + _long(not_before))
                append(b"".join(parts))
        except CodecError as exc:
            raise CodecError(f"cannot encode FrontierEntry {_url_of(entry)}: {exc}") from exc
        except _ENCODE_ERRORS as exc:
            message = f"cannot encode FrontierEntry {_url_of(entry)}"
            raise codec_error(message, exc) from exc
        return out


def _url_of(entry: object) -> str:
    url = getattr(entry, "url", None)
    return repr(url[:200]) if isinstance(url, str) else "(no url)"


def container_block(bodies: list[bytes], sync: bytes) -> bytes:
    """One uncompressed ("null" codec) container block of `bodies`: record count, byte
    size, the records, the file's sync marker (Avro spec, Object Container Files)."""
    data = b"".join(bodies)
    return avro_long(len(bodies)) + avro_long(len(data)) + data + sync


def write_entry_block(
    handle: IO[bytes], encoder: FrontierEntryEncoder, entries: Iterable[FrontierEntry], sync: bytes
) -> int:
    """Append `entries` as one block to a container of FrontierEntries opened at its end;
    returns how many were written (nothing is written for none)."""
    bodies = encoder.bodies(entries)
    if bodies:
        handle.write(container_block(bodies, sync))
    return len(bodies)


_SINGLE_OBJECT_ENCODER = FrontierEntryEncoder()


def single_object_entries(entries: Iterable[FrontierEntry]) -> list[bytes]:
    """Each entry's Avro single-object encoding — the bytes `codecs.encode_record` gives
    (header, then body) — with the bodies encoded as one block (`FrontierEntryEncoder`)."""
    header = AvroCodec.for_name("FrontierEntry").header
    return [header + body for body in _SINGLE_OBJECT_ENCODER.bodies(entries)]
