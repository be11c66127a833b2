"""Recorded crawls in, frontier files out: the file source and sink of `frontierflow replay`.

The source reads FetchEvents from an Avro container file, JSON lines or a WARC/ARC file
(`connectors.warc`), from any record position, and turns what cannot be decoded into
`Failed` items for the dead-letter output.
The sink appends frontier entries (Avro container or JSON lines) and dead letters (JSON
lines); its position is the byte length of both files after a flush, and `rewind` cuts
them back to a committed position, so a step redone after a crash writes the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from frontierflow.connectors.base import DecisionSink, Failed, InputItem, Position
from frontierflow.schemas.codecs import CodecError, record_from_dict
from frontierflow.schemas.container import (
    SNIFF_BYTES,
    LogItem,
    container_sync,
    iter_log_from,
    log_format,
    start_container,
    write_container,
)
from frontierflow.schemas.entry_blocks import FrontierEntryEncoder, write_entry_block
from frontierflow.schemas.jsonl import record_to_json
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    ScalingDecision,
)
from frontierflow.state.storage.codec import StateCodecError, decode_positions, encode_positions

if TYPE_CHECKING:
    from frontierflow.connectors.warc import WarcOptions


def read_fetch_events(
    path: Path, start: int = 0, warc: WarcOptions | None = None
) -> Iterator[InputItem]:
    """(position, FetchEvent or Failed, raw bytes) for every record from `start` on: of an
    Avro container, JSON lines, or a WARC/ARC file read with `warc` (`schemas.container.
    log_format` tells which)."""
    if not path.exists():
        raise FileNotFoundError(f"no such log: {path}")
    if is_warc_log(path):
        return _warc_file_items(path, start, warc)
    return fetch_event_items(iter_log_from(path, "FetchEvent", start))


def load_warc_reader() -> Any:
    """`connectors.warc.warc_items`; warcio comes with the `warc` extra, and its absence is
    said plainly rather than as an import error deep in a replay."""
    try:
        from frontierflow.connectors.warc import warc_items
    except ImportError as exc:
        raise ValueError(
            "reading WARC/ARC files needs warcio: pip install 'frontierflow[warc]'"
        ) from exc
    return warc_items


def is_warc_log(path: Path) -> bool:
    """Whether `path` is a WARC or ARC file: by its first bytes and its name, or by its name
    alone when it is no local file (a remote path a Beam pipeline reads)."""
    if not path.is_file():
        return log_format(b"", path.name) == "warc"
    with path.open("rb") as handle:
        return log_format(handle.read(SNIFF_BYTES), path.name) == "warc"


def _warc_file_items(path: Path, start: int, options: WarcOptions | None) -> Iterator[InputItem]:
    warc_items = load_warc_reader()
    with path.open("rb") as handle:
        yield from warc_items(handle, path.name, start, options)


def fetch_event_items(records: Iterable[LogItem]) -> Iterator[InputItem]:
    """A log's (index, record or CodecError, raw) as input items: the record as a FetchEvent,
    or `Failed` with the reason it is not one. Every reader of logs uses this."""
    for index, record, raw in records:
        position = Position(None, index)
        if isinstance(record, CodecError):
            yield position, Failed("CodecError", str(record), raw), raw
            continue
        try:
            yield position, record_from_dict(FetchEvent, record), raw
        except CodecError as exc:
            yield position, Failed("CodecError", str(exc), raw), raw


class FileSink(DecisionSink):
    """Frontier entries to `out` (.avro: Avro container, else JSON lines), dead letters to
    `dead_letters` (JSON lines), and the speed controller's ScalingDecisions to `decisions`
    (JSON lines) when given. Removals are not written: a file holds upserts only, and the
    replay's final frontier is the latest entry per URL not fetched since."""

    def __init__(
        self, out: Path, dead_letters: Path, *, decisions: Path | None = None, fsync: bool = False
    ) -> None:
        self.out = out
        self.dead_path = dead_letters
        self.decisions_path = decisions
        self.avro = out.suffix == ".avro"
        self.fsync = fsync
        self._out: IO[bytes] | None = None
        self._dead: IO[bytes] | None = None
        self._decisions: IO[bytes] | None = None
        self._container_sync: bytes | None = None
        """The sync marker of the frontier container's header, once it has one."""
        self._encoder = FrontierEntryEncoder()

    def rewind(self, position: bytes | None) -> None:
        """Cut the files back to `position` (None: start them empty) and open them."""
        sizes: tuple[int, ...] = (0, 0, 0)
        if position is not None:
            sizes = decode_positions(position, "FileSink position")
            if len(sizes) not in (2, 3):
                raise StateCodecError(
                    f"corrupt FileSink position: {len(sizes)} file sizes, expected 2 or 3"
                )
            sizes = (*sizes, 0)[:3]
        self.close()
        paths = [self.out, self.dead_path]
        if self.decisions_path is not None:
            paths.append(self.decisions_path)
        for path, size in zip(paths, sizes, strict=False):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("ab") as f:
                f.truncate(size)
        self._out = self.out.open("a+b")
        self._dead = self.dead_path.open("ab")
        if self.decisions_path is not None:
            self._decisions = self.decisions_path.open("ab")
        self._container_sync = None
        if self.avro and sizes[0] > 0:  # blocks go on with the header's sync marker
            self._container_sync = container_sync(self._out)

    def write_decisions(self, decisions: Sequence[ScalingDecision]) -> None:
        if self._decisions is None:
            raise RuntimeError("FileSink has no decisions file")
        text = "".join(record_to_json(d.to_avro(), "ScalingDecision") + "\n" for d in decisions)
        self._decisions.write(text.encode())

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        if self._out is None or self._dead is None:
            raise RuntimeError("FileSink.write before rewind")
        entries = [c for c in changes if isinstance(c, FrontierEntry)]
        if entries:
            if self.avro:
                if self._container_sync is None:
                    self._container_sync = start_container(self._out, "FrontierEntry")
                write_entry_block(self._out, self._encoder, entries, self._container_sync)
            else:
                lines = "".join(
                    record_to_json(e.to_avro(), "FrontierEntry") + "\n" for e in entries
                )
                self._out.write(lines.encode())
        if dead:
            text = "".join(record_to_json(d.to_avro(), "DeadLetter") + "\n" for d in dead)
            self._dead.write(text.encode())

    def flush(self) -> bytes:
        """Flush the files (and fsync them if asked); the position token is their sizes:
        frontier, dead letters, and decisions when the sink has a decisions file."""
        if self._out is None or self._dead is None:
            raise RuntimeError("FileSink.flush before rewind")
        handles = [self._out, self._dead]
        if self._decisions is not None:
            handles.append(self._decisions)
        return encode_positions([self._sync(handle) for handle in handles])

    def _sync(self, handle: IO[bytes]) -> int:
        handle.flush()
        if self.fsync:
            os.fsync(handle.fileno())
        return handle.seek(0, os.SEEK_END)

    def close(self) -> None:
        for handle in (self._out, self._dead, self._decisions):
            if handle is not None:
                handle.close()
        self._out = self._dead = self._decisions = None


def write_event_log(
    items: Iterable[InputItem], out: Path, dead_letters: Path, *, source: str
) -> tuple[int, int]:
    """Write the FetchEvents of `items` to `out` (an Avro container file, for `replay` and
    the Beam pipelines to read again) and its failures to `dead_letters` (JSON lines, with
    the record index and the reason); returns (events, dead letters)."""
    dead = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with dead_letters.open("wb") as dead_file:

        def events() -> Iterator[dict[str, object]]:
            nonlocal dead
            for position, item, raw in items:
                if isinstance(item, Failed):
                    letter = item.dead_letter(source, position.partition, position.offset, raw)
                    line = record_to_json(letter.to_avro(), "DeadLetter") + "\n"
                    dead_file.write(line.encode())
                    dead += 1
                else:
                    yield item.to_avro()

        written = write_container(out, "FetchEvent", events())
    return written, dead
