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
    container_log,
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


class ReadFetchEventLog(beam.PTransform):
    """(valid `(position, FetchEvent)`s, `DeadLetter`s) of one log file.

    `path` is a local path or any URL Beam's `FileSystems` knows (`gs://…` with the GCP
    extra installed). It must name exactly one file: positions are record indexes, and two
    files would give two records the same position. Checked when the pipeline is built.
    """

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.source = str(path)
        self.path = one_log_file(self.source)

    def expand(self, pbegin: Any) -> tuple[Any, Any]:
        read = (
            pbegin
            | "LogPath" >> beam.Create([self.path])
            | "ReadChecked" >> beam.ParDo(_ReadLog(self.source)).with_outputs(DEAD, main="events")
        )
        return with_dead_letters(read)  # the grouping steps after this spread the work


class _ReadLog(beam.DoFn):
    def __init__(self, source: str) -> None:
        self.source = source

    def process(self, path: str) -> Iterator[Any]:
        for position, decoded, raw in read_log_items(path):
            item = checked_item(self.source, None, position.offset, decoded, raw)
            if item is not None:
                yield item


def read_log_items(path: str) -> Iterator[Any]:
    """The input items of one log, opened through `FileSystems` (any registered scheme): an
    Avro container, JSON lines, or a WARC/ARC file (read as `frontierflow replay` reads it,
    positions being record indexes either way)."""
    # a WARC's gzip members are read one by one (a corrupt one is skipped): no decompression
    # by Beam, which picks it from a name ending in .gz
    compression = (
        CompressionTypes.UNCOMPRESSED
        if path.lower().endswith(WARC_SUFFIXES)
        else CompressionTypes.AUTO
    )
    with FileSystems.open(path, "application/octet-stream", compression) as handle:
        kind = log_format(handle.read(SNIFF_BYTES), path)
        handle.seek(0)
        if kind == "warc":
            yield from load_warc_reader()(handle, path.rsplit("/", 1)[-1])
            return
        records = (
            container_log(handle, "FetchEvent", 0)
            if kind == "container"
            else jsonl_log(handle, "FetchEvent", 0)
        )
        yield from fetch_event_items(records)


def one_log_file(path: str) -> str:
    """The one file `path` names, through `FileSystems.match`; refused clearly otherwise.

    A remote URL (`scheme://`) is taken as given when listing it fails here (no credentials
    where the pipeline is built): the worker that opens it then reports a missing file.
    """
    remote = "://" in path
    try:
        found = FileSystems.match([path])[0].metadata_list
    except (OSError, ValueError) as exc:  # BeamIOError is an IOError
        if remote:
            return path
        raise FileNotFoundError(f"cannot read log {path}: {exc}") from exc
    if not found:
        raise FileNotFoundError(f"no such log: {path}")
    if len(found) > 1:
        raise ValueError(f"log {path} matches {len(found)} files; give one file")
    return str(found[0].path)


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
