"""The two no-work baselines of `frontierflow bench`: the raw ceiling (fastavro alone reading
the log and writing one full FrontierEntry per outlink, no project code) and the pass-through
(the project's file source and sink, one entry per outlink, no state and no logic)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, cast

import fastavro

from frontierflow.connectors.logs import FileSink, read_fetch_events
from frontierflow.pipelines.strategies.base import EntryFactory
from frontierflow.schemas.records import FetchEvent, FrontierEntry


def raw_ceiling(log: Path, out: Path, step_size: int) -> tuple[int, int]:
    """fastavro alone: read every event of the container `log` and write one full
    FrontierEntry per outlink to the container `out`, one `fastavro.writer` block per
    `step_size` events as the sink writes them. No project code: the floor of what any
    strategy over this log costs. Timestamps stay epoch milliseconds, as the project reads
    them (a `timestamp-millis` read as a datetime and written back costs more than the
    project's whole pass-through). Returns (events, entries)."""
    avsc = resources.files("frontierflow.schemas").joinpath("frontier_entry.avsc")
    schema = fastavro.parse_schema(json.loads(avsc.read_text(encoding="utf-8")))
    events = entries = 0
    batch: list[dict[str, object]] = []
    with log.open("rb") as src, out.open("w+b") as dst:
        blocks = fastavro.block_reader(src)
        written = json.loads(blocks.metadata["avro.schema"])
        event_schema = fastavro.parse_schema(_without_logical_types(written))
        for block in blocks:
            data = block.bytes_  # type: ignore[attr-defined]  # the decompressed block
            for _ in range(block.num_records):
                event = cast(dict[str, Any], fastavro.schemaless_reader(data, event_schema, None))
                via, crawl_id, cycle = event["url"], event["crawl_id"], event["cycle"]
                emitted_at = event["fetched_at"]
                batch.extend(
                    {
                        "url": child,
                        "host": child.split("/", 3)[2],
                        "priority": 0.0,
                        "strategy": "raw",
                        "crawl_id": crawl_id,
                        "cycle": cycle,
                        "via": via,
                        "emitted_at": emitted_at,
                        "echo": {"ieca.d": "0.0"},
                    }
                    for child in event["outlinks"]
                )
                events += 1
                if events % step_size == 0:
                    entries += len(batch)
                    fastavro.writer(dst, schema, batch, codec="null")
                    batch = []
        entries += len(batch)
        fastavro.writer(dst, schema, batch, codec="null")
    return events, entries


def _without_logical_types(schema: Any) -> Any:
    """A schema (JSON form) whose logical types are read as their base types."""
    if isinstance(schema, dict):
        if "logicalType" in schema:
            return schema["type"]
        return {k: _without_logical_types(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_without_logical_types(v) for v in schema]
    return schema


def pass_through(log: Path, out: Path, step_size: int) -> tuple[int, int]:
    """Decode every event and encode one frontier entry per outlink, as IECA writes one per
    changed link: the same input and output volume with no state and no logic.
    Returns (events, entries)."""
    sink = FileSink(out, out.with_name(out.name + ".dead-letters.jsonl"))
    sink.rewind(None)
    entries = EntryFactory("pass-through")
    batch: list[FrontierEntry] = []
    count = entries_written = 0
    for _, event, _ in read_fetch_events(log):
        if not isinstance(event, FetchEvent):
            continue
        batch.extend(
            entries.entry_owning_echo(
                child,
                0.0,
                event.crawl_id,
                event.cycle,
                event.url,
                event.fetched_at,
                {"ieca.d": "0.0"},
            )
            for child in event.outlinks
        )
        count += 1
        if count % step_size == 0:
            entries_written += len(batch)
            sink.write(batch, ())
            sink.flush()
            batch = []
    entries_written += len(batch)
    sink.write(batch, ())
    sink.flush()
    sink.close()
    return count, entries_written
