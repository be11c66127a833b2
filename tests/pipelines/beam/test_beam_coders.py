"""Records cross Beam stages once encoded, through the project's Avro coders: every
PCollection of the replay and stream graphs that carries a wire record or a per-URL update
has one of those coders, and none falls back to pickling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.pipeline import PipelineVisitor

from frontierflow.pipelines.beam import coders as ours
from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.replay import build_replay
from frontierflow.pipelines.beam.stream_replay import build_stream_replay
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.codecs import encode_record
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierEntry, Removal

_CARRIED = ("FetchEvent", "DeadLetter", "UrlUpdate", "ScalingDecision")


class _Coders(PipelineVisitor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.found: dict[str, coders.Coder] = {}

    def visit_value(self, value: Any, producer: Any) -> None:
        hint = str(value.element_type)
        if producer.full_label.startswith("Read/") or any(n in hint for n in _CARRIED):
            where = f"{producer.full_label} ({value.tag or 'main'}): {hint}"
            self.found[where] = coders.registry.get_coder(value.element_type)


def _graph(tmp_path: Path, build: Any) -> dict[str, Any]:
    log = tmp_path / "log.avro"
    event = {"url": "https://a.example/", "fetched_at": 1, "status": 200}
    write_container(log, "FetchEvent", [{**event, "fetcher_id": "f", "host": "a.example"}])
    pipeline = beam.Pipeline(argv=["--runner=FnApiRunner"])
    build(pipeline, log, build_strategy("ieca", budget=100), str(tmp_path / "out"))
    visitor = _Coders()
    pipeline.visit(visitor)
    return visitor.found


def _no_pickling(found: dict[str, Any]) -> None:
    """Every record-carrying PCollection has a coder that names no fallback to pickling."""
    assert found, "no PCollection carries a record: the graph changed shape"
    for where, coder in found.items():
        if where.startswith(("Read/LogParts", "Read/SpreadParts")):
            continue  # the log's path and a part number, and the reshuffle spreading them
        assert "FastPrimitivesCoder" not in repr(coder), where
        assert "PickleCoder" not in repr(coder), where


def test_replay_graph_uses_the_record_coders(tmp_path: Path) -> None:
    found = _graph(tmp_path, build_replay)
    _no_pickling(found)
    names = " ".join(repr(c) for c in found.values())
    for coder in ("FetchEventCoder", "DeadLetterCoder", "UrlUpdateCoder"):
        assert coder in names


def test_stream_graph_uses_the_record_coders(tmp_path: Path) -> None:
    def build(pipeline: Any, log: Path, strategy: Any, out: str) -> None:
        build_stream_replay(pipeline, log, strategy, out, ClockWindows(10))

    _no_pickling(_graph(tmp_path, build))


@pytest.mark.parametrize(
    "record",
    [
        FetchEvent("https://a.example/", 5, 200, "f", "a.example", outlinks=("https://b/",)),
        FrontierEntry("https://b/", "b", 1.5, "ieca", "c", 0, None, 5, {"ieca.d": "0.3"}),
        DeadLetter("topic", 0, 7, "CodecError", "bad", b"\x00\xff", 9),
    ],
)
def test_wire_records_round_trip(record: Any) -> None:
    coder = coders.registry.get_coder(type(record))
    assert coder.decode(coder.encode(record)) == record


def test_changes_and_updates_round_trip() -> None:
    entry = FrontierEntry("https://b/", "b", 1.5, "ieca", "c", 0, "https://a/", 5, {"k": "v"})
    update = ours.UrlUpdate("https://b/", b"\x01\x02", (entry, Removal("https://c/")), (1, 2, 3))
    coder = coders.registry.get_coder(ours.UrlUpdate)
    assert coder.decode(coder.encode(update)) == update
    empty = ours.UrlUpdate("https://b/", None, ())
    assert coder.decode(coder.encode(empty)) == empty


def test_a_change_is_its_tag_and_the_entry_s_avro_bytes() -> None:
    """Entries encoded as one block carry the bytes `encode_record` gives each alone."""
    changes = [
        FrontierEntry("https://b/", "b", 1.5, "ieca", "c", 0, "https://a/", 5, {"k": "v"}),
        Removal("https://c/"),
        FrontierEntry("https://d/x", "d", -2.0, "lafc", "c2", 3, None, 7, {}, 99),
    ]
    assert ours.encode_changes(changes) == [
        b"\x01" + encode_record(changes[0]),
        b"\x00https://c/",
        b"\x01" + encode_record(changes[2]),
    ]
    coder = ours.FrontierChangeCoder()
    assert [coder.encode(c) for c in changes] == ours.encode_changes(changes)


def test_speed_graph_carries_events_and_decisions_as_records() -> None:
    """The speed controller's Beam form: events and ScalingDecisions cross its stages
    through their Avro coders, never pickled."""
    from frontierflow.pipelines.beam.speed import scaling_decisions
    from frontierflow.pipelines.speed.settings import settings_for

    pipeline = beam.Pipeline(argv=["--runner=FnApiRunner"])
    event = FetchEvent("https://a.example/", 5, 200, "f", "a.example")
    log = pipeline | beam.Create([(0, event)]).with_output_types(
        beam.typehints.Tuple[int, FetchEvent]
    )
    scaling_decisions(log, settings_for("hypothesis"))
    visitor = _Coders()
    pipeline.visit(visitor)
    found = {
        where: coder
        for where, coder in visitor.found.items()
        if "FetchEvent" in where or "ScalingDecision" in where
    }
    assert any("ScalingDecision" in where for where in found)
    _no_pickling(found)
