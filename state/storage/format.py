"""The on-disk format of a state directory: the engine's bookkeeping keys and the format version.

Every store records its format under `STORE_FORMAT_KEY` in the `meta` family. A directory
written before the key existed (format 1, release 0.1.0) is migrated in place, in one write
batch, when a store opens it; a directory of a newer, unknown format is refused.

Formats (strategy families and the `speed` family are the same in both):
1. no version key; the engine's integers little-endian: `crawled` values ``<i``, the
   ``crawled/<crawl id>`` counters ``<Q``, ``input.position`` ``<Q`` (a log's next record)
   or ``<I`` count + ``<iq`` (partition, offset) pairs (Kafka), ``output.position`` ``<QQ``
   or ``<QQQ`` (a FileSink's file sizes) or empty (Kafka).
2. ``store.format`` = `encode_u64` (2); `crawled` values `encode_i32`, counters
   `encode_u64`, both positions position tokens (`encode_positions`; Kafka: partition,
   next offset, partition, next offset, ...).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Iterable
from typing import Final

from frontierflow.state.storage.codec import (
    StateCodecError,
    decode_u64,
    encode_i32,
    encode_positions,
    encode_u64,
)
from frontierflow.state.storage.store import META_FAMILY, StoreError

CRAWLED_FAMILY: Final = "crawled"
"""Engine-owned: URL → the last cycle it was fetched in (`encode_i32`), to count pages and
drop repeats."""
INPUT_POSITION: Final = b"input.position"
"""Meta key: the source's resume token committed with the last step (a position token)."""
SEEDS_POSITION: Final = b"input.seeds"
"""Meta key: the seeds source's resume token committed with the last seeds step (a position
token, like `INPUT_POSITION`)."""
OUTPUT_POSITION: Final = b"output.position"
"""Meta key: the sink's position after the flush of the last committed step (a position
token)."""
CRAWLED_PREFIX: Final = b"crawled/"
"""Meta keys ``crawled/<crawl id>``: distinct pages fetched so far in a crawl (`encode_u64`)."""
STORE_FORMAT_KEY: Final = b"store.format"
"""Meta key: the format version of the directory (`encode_u64`)."""
STORE_FORMAT: Final = 2
"""The format this code writes."""
NEW_STORE: Final = 0
"""What `stored_format` says of a store with no version key and no data."""

FamilyReader = Callable[[str], Iterable[tuple[bytes, bytes]]]
"""Every (key, value) of a family, as a migration reads them."""

_V1_U64 = struct.Struct("<Q")
_V1_I32 = struct.Struct("<i")
_V1_KAFKA_COUNT = struct.Struct("<I")
_V1_KAFKA_PAIR = struct.Struct("<iq")


class StoreFormatError(StoreError):
    """A state directory whose format this code cannot read or migrate."""


def crawled_key(crawl_id: str) -> bytes:
    """The meta key of the page counter of `crawl_id`."""
    return CRAWLED_PREFIX + crawl_id.encode()


def stored_format(version: bytes | None, has_data: bool) -> int:
    """The format of a store from the value of its version key and whether it holds data.

    No key: `NEW_STORE` when empty, else 1 (written before the key existed). A key that is
    unreadable or names another format than 2 raises StoreFormatError.
    """
    if version is None:
        return 1 if has_data else NEW_STORE
    try:
        found = decode_u64(version)
    except StateCodecError as exc:
        raise StoreFormatError(f"unreadable store format {version!r}: {exc}") from exc
    if found > STORE_FORMAT:
        raise StoreFormatError(
            f"store format {found} was written by a newer frontierflow; this version reads "
            f"formats 1 to {STORE_FORMAT}: open the directory with the release that wrote it"
        )
    if found != STORE_FORMAT:
        raise StoreFormatError(f"unknown store format {found} (this version writes {STORE_FORMAT})")
    return found


def upgrade_changes(
    version: int, read: FamilyReader, families: Collection[str]
) -> dict[str, dict[bytes, bytes | None]]:
    """The writes that bring a store of format `version` to `STORE_FORMAT`, version key
    included, to be committed as one batch; `families` are those the directory has."""
    changes: dict[str, dict[bytes, bytes | None]] = {}
    if version == 1:
        changes = _format_1_changes(read, families)
    elif version != NEW_STORE:
        raise StoreFormatError(f"no migration from store format {version}")
    changes.setdefault(META_FAMILY, {})[STORE_FORMAT_KEY] = encode_u64(STORE_FORMAT)
    return changes


def _format_1_changes(
    read: FamilyReader, families: Collection[str]
) -> dict[str, dict[bytes, bytes | None]]:
    """Format 1 → 2: the engine's little-endian integers become big-endian (module docstring)."""
    changes: dict[str, dict[bytes, bytes | None]] = {}
    if CRAWLED_FAMILY in families:
        changes[CRAWLED_FAMILY] = {
            key: encode_i32(_v1_unpack(_V1_I32, CRAWLED_FAMILY, key, value)[0])
            for key, value in read(CRAWLED_FAMILY)
        }
    meta: dict[bytes, bytes | None] = {}
    for key, value in read(META_FAMILY) if META_FAMILY in families else ():
        if key.startswith(CRAWLED_PREFIX):
            meta[key] = encode_u64(_v1_unpack(_V1_U64, META_FAMILY, key, value)[0])
        elif key in (INPUT_POSITION, OUTPUT_POSITION):
            meta[key] = _v1_position(key, value)
    changes[META_FAMILY] = meta
    return changes


def _v1_unpack(layout: struct.Struct, family: str, key: bytes, value: bytes) -> tuple[int, ...]:
    if len(value) != layout.size:
        raise StoreFormatError(
            f"format-1 value of {family} key {key!r} has {len(value)} bytes, "
            f"not {layout.size} ({layout.format})"
        )
    return layout.unpack(value)


def _v1_position(key: bytes, value: bytes) -> bytes:
    """A format-1 position as a position token."""
    if key == OUTPUT_POSITION or len(value) == _V1_U64.size:
        if len(value) % _V1_U64.size:
            raise StoreFormatError(f"format-1 {key!r} of {len(value)} bytes is no list of <Q")
        return encode_positions([p for (p,) in _V1_U64.iter_unpack(value)])
    # the Kafka source's checkpoint: <I count, then count × <iq (partition, next offset)
    body = value[_V1_KAFKA_COUNT.size :]
    count = -1
    if len(value) >= _V1_KAFKA_COUNT.size:
        (count,) = _V1_KAFKA_COUNT.unpack_from(value)
    if len(body) != count * _V1_KAFKA_PAIR.size:
        raise StoreFormatError(f"format-1 {key!r} of {len(value)} bytes is no known checkpoint")
    pairs = list(_V1_KAFKA_PAIR.iter_unpack(body))
    try:
        return encode_positions([n for pair in pairs for n in pair])
    except StateCodecError as exc:
        raise StoreFormatError(f"format-1 {key!r} holds a negative partition or offset") from exc
