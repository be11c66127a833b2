"""Log files in and result files out for the Beam pipelines, and the checked input item.

Every source of a Beam pipeline (a log file here, Kafka in `beam.kafka`) decodes each
record once and validates it once with the step core's `checked`: valid events leave as
typed `(position, FetchEvent)` on the main output, everything else as a typed
`DeadLetter` on `DEAD`. Records are written as JSON only at the files' edge.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from frontierflow.connectors.base import Failed
from frontierflow.connectors.logs import fetch_event_items, load_warc_reader
from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.core.step import is_page_answer
from frontierflow.pipelines.core.validate import checked
from frontierflow.schemas.container import (
    SNIFF_BYTES,
    WARC_SUFFIXES,
    container_log_part,
    jsonl_log,
    log_format,
)
from frontierflow.schemas.jsonl import record_to_json
from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierEntry

DEAD = "dead"
"""The tag of every Beam source's dead-letter output."""

PositionedEvent = typehints.Tuple[int, FetchEvent]


def checked_item(
    source: str, partition: int | None, position: int, decoded: FetchEvent | Failed, raw: bytes
) -> Any:
    """A decoded record as a Beam output: `(position, event)` if it passes the step core's
    checks, else a tagged `DeadLetter` with the reason and the raw bytes. A deferred
    answer (a 429, not its page's: `is_page_answer`) is an event too: the host rule reads
    it (`beam.hosts`), the frontier's steps do not (`page_answers`)."""
    event = checked(decoded)
    if isinstance(event, Failed):
        return beam.pvalue.TaggedOutput(DEAD, event.dead_letter(source, partition, position, raw))
    return (position, event)


def page_answers(events: Any) -> Any:
    """The `(position, FetchEvent)`s that answer for their pages (`is_page_answer`): what
    the frontier's steps apply; a deferred answer is its host's only."""
    return events | "PageAnswers" >> beam.Filter(
        lambda item: is_page_answer(item[1])
    ).with_output_types(PositionedEvent)


def with_dead_letters(outputs: Any) -> tuple[Any, Any]:
    """(events, dead letters) of a source's ParDo `.with_outputs(DEAD, main="events")`, both
    typed so they cross stages through their Avro coders (`beam.coders`)."""
    events, dead = outputs.events, outputs[DEAD]
    events.element_type = PositionedEvent
    dead.element_type = DeadLetter
    return events, dead


READ_PARTS = 8
"""How many parts an Avro container log is read in, side by side (`container_log_part`):
enough for the workers of a small cluster, few enough that the block headers each part
scans past (a seek each) cost little beside its share of the decoding. JSON lines and WARC
files are read in one part."""


class ReadFetchEventLog(beam.PTransform):
    """(valid `(position, FetchEvent)`s, `DeadLetter`s) of one log file.

    `path` is a local path or any URL Beam's `FileSystems` knows (`gs://…` with the GCP
    extra installed). It must name exactly one file: positions are record indexes, and two
    files would give two records the same position. Checked when the pipeline is built,
    when its size (`size`, None if it cannot be listed there) is read too.
    An Avro container is read in `parts` parts (its blocks dealt round, `container_log_part`)
    spread over the workers by a reshuffle; JSON lines and WARC files in one. The format is
    sniffed when the pipeline is built; a remote file that cannot be opened then is read in
    one part.
    """

    def __init__(self, path: Path | str, parts: int = READ_PARTS) -> None:
        super().__init__()
        if parts < 1:
            raise ValueError(f"parts must be >= 1, got {parts}")
        self.source = str(path)
        self.path, self.size = _one_log_file(self.source)
        self.parts = parts if _is_container_log(self.path) else 1

    def expand(self, pbegin: Any) -> tuple[Any, Any]:
        # Create's own reshuffle is off: the parts are spread by one explicit step, and a
        # single part (JSON lines, WARC) needs none
        parts = pbegin | "LogParts" >> beam.Create(
            [(self.path, part) for part in range(self.parts)], reshuffle=False
        ).with_output_types(typehints.Tuple[str, int])
        if self.parts > 1:
            parts = parts | "SpreadParts" >> beam.Reshuffle().with_output_types(
                typehints.Tuple[str, int]
            )
        read = parts | "ReadChecked" >> beam.ParDo(_ReadLog(self.source, self.parts)).with_outputs(
            DEAD, main="events"
        )
        return with_dead_letters(read)  # the grouping steps after this spread the work


class _ReadLog(beam.DoFn):
    def __init__(self, source: str, parts: int) -> None:
        self.source = source
        self.parts = parts

    def process(self, element: tuple[str, int]) -> Iterator[Any]:
        path, part = element
        for position, decoded, raw in read_log_items(path, part, self.parts):
            item = checked_item(self.source, None, position.offset, decoded, raw)
            if item is not None:
                yield item


def _open_log(path: str) -> Any:
    """`path` opened through `FileSystems`; a WARC's gzip members are read one by one (a
    corrupt one is skipped): no decompression by Beam, which picks it from a name ending
    in .gz."""
    compression = (
        CompressionTypes.UNCOMPRESSED
        if path.lower().endswith(WARC_SUFFIXES)
        else CompressionTypes.AUTO
    )
    return FileSystems.open(path, "application/octet-stream", compression)


def _is_container_log(path: str) -> bool:
    """Whether the log `path` is an Avro container, from its first bytes; False for a
    remote file that cannot be opened where the pipeline is built (read in one part)."""
    try:
        with _open_log(path) as handle:
            return log_format(handle.read(SNIFF_BYTES), path) == "container"
    except (OSError, ValueError):  # BeamIOError is an IOError
        if "://" in path:
            return False
        raise


def read_log_items(path: str, part: int = 0, parts: int = 1) -> Iterator[Any]:
    """The input items of one log, opened through `FileSystems` (any registered scheme): an
    Avro container, JSON lines, or a WARC/ARC file (read as `frontierflow replay` reads it,
    positions being record indexes either way). Of a container, only the items of `part`
    of `parts` (`container_log_part`); any other log is read whole by part 0, and the
    other parts give nothing."""
    with _open_log(path) as handle:
        kind = log_format(handle.read(SNIFF_BYTES), path)
        handle.seek(0)
        if kind == "container":
            yield from fetch_event_items(container_log_part(handle, "FetchEvent", part, parts))
            return
        if part != 0:
            return
        if kind == "warc":
            yield from load_warc_reader()(handle, path.rsplit("/", 1)[-1])
            return
        yield from fetch_event_items(jsonl_log(handle, "FetchEvent", 0))


def one_log_file(path: str) -> str:
    """The one file `path` names, through `FileSystems.match`; refused clearly otherwise.

    A remote URL (`scheme://`) is taken as given when listing it fails here (no credentials
    where the pipeline is built): the worker that opens it then reports a missing file.
    """
    return _one_log_file(path)[0]


def _one_log_file(path: str) -> tuple[str, int | None]:
    """`one_log_file` and the file's size in bytes (None when it cannot be listed here)."""
    remote = "://" in path
    try:
        found = FileSystems.match([path])[0].metadata_list
    except (OSError, ValueError) as exc:  # BeamIOError is an IOError
        if remote:
            return path, None
        raise FileNotFoundError(f"cannot read log {path}: {exc}") from exc
    if not found:
        raise FileNotFoundError(f"no such log: {path}")
    if len(found) > 1:
        raise ValueError(f"log {path} matches {len(found)} files; give one file")
    return str(found[0].path), int(found[0].size_in_bytes)


class WriteResults(beam.PTransform):
    """(per-URL updates, dead letters) → `<out>-frontier*.jsonl` (entries: a file holds
    upserts, as the engine's `FileSink`), `<out>-state*.jsonl` and
    `<out>-dead-letters*.jsonl`."""

    def __init__(self, out_prefix: str) -> None:
        super().__init__()
        self.out_prefix = out_prefix

    def expand(self, pcolls: Any) -> Any:
        results, dead = pcolls
        out = self.out_prefix
        (
            results
            | "Entries" >> beam.FlatMap(_entry_lines)
            | "WriteFrontier" >> beam.io.WriteToText(out + "-frontier", ".jsonl")
        )
        (
            results
            | "States" >> beam.FlatMap(_state_line)
            | "WriteState" >> beam.io.WriteToText(out + "-state", ".jsonl")
        )
        return (
            dead
            | "DeadLines"
            >> beam.Map(lambda d: record_to_json(d.to_avro(), "DeadLetter", validate=False))
            | "WriteDead" >> beam.io.WriteToText(out + "-dead-letters", ".jsonl")
        )


class WriteKeyedStates(beam.PTransform):
    """(key, state bytes)s → `<prefix>*.jsonl`, one `{"key", "state"}` (base64) a line."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def expand(self, states: Any) -> Any:
        return (
            states
            | "Lines"
            >> beam.MapTuple(
                lambda key, raw: json.dumps({"key": key, "state": base64.b64encode(raw).decode()})
            )
            | "Write" >> beam.io.WriteToText(self.prefix, ".jsonl")
        )


def _entry_lines(update: UrlUpdate) -> list[str]:
    return [
        record_to_json(change.to_avro(), "FrontierEntry", validate=False)
        for change in update.changes
        if isinstance(change, FrontierEntry)
    ]


def _state_line(update: UrlUpdate) -> list[str]:
    if update.state is None:  # no state, or a piece of an update that carries none
        return []
    return [json.dumps({"url": update.url, "state": base64.b64encode(update.state).decode()})]
