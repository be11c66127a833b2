"""`bench kafka --beam-stream`: what it needs is found or named (the run itself is measured
by hand, docs/RESULTS.md: two Flink jobs take minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontierflow.pipelines.bench.flink_rest import WatermarkLags, vertex_lag
from frontierflow.pipelines.bench.frontier_match import FrontierMatch
from frontierflow.pipelines.bench.kafka import by_send_time, entry_latency, percentiles
from frontierflow.pipelines.bench.kafka_stream import (
    STARTUP_EVENTS,
    StreamBenchSetup,
    kafka_expansion_jar,
    pace_note,
)
from frontierflow.pipelines.cli import main
from frontierflow.schemas.codecs import encode_record
from frontierflow.schemas.records import FrontierEntry


def test_the_expansion_service_sits_beside_the_assembled_job_server() -> None:
    jar = "/c/beam-runners-flink-1.19-job-server-2.62.0-launcher.jar"
    assert kafka_expansion_jar(jar) == Path(
        "/c/beam-runners-flink-1.19-job-server-2.62.0-kafka-expansion-launcher.jar"
    )
    with pytest.raises(ValueError, match="not an assembled job-server launcher"):
        kafka_expansion_jar("/c/beam-runners-flink-1.19-job-server-2.62.0.jar")


@pytest.mark.parametrize(
    ("runner", "events", "message"),
    [("prism", 100, "one of flink, flink-cluster"), ("flink", STARTUP_EVENTS, "must be >")],
)
def test_setup_refuses_what_it_cannot_measure(runner: str, events: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StreamBenchSetup("127.0.0.1:9", runner, "j", "e", events=events)


def test_the_fetch_events_topics_have_at_least_one_partition() -> None:
    assert StreamBenchSetup("127.0.0.1:9", "flink", "j", "e", fetch_partitions=2)
    with pytest.raises(ValueError, match="--fetch-partitions must be >= 1"):
        StreamBenchSetup("127.0.0.1:9", "flink", "j", "e", fetch_partitions=0)


def test_the_latency_is_paced_at_a_positive_rate_when_one_is_given() -> None:
    assert StreamBenchSetup("127.0.0.1:9", "flink", "j", "e", latency_rate=79.2).latency_rate
    for rate in (0.0, -1.0):
        with pytest.raises(ValueError, match="--latency-rate must be > 0"):
            StreamBenchSetup("127.0.0.1:9", "flink", "j", "e", latency_rate=rate)


def test_cli_names_the_script_when_the_expansion_service_is_missing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    jar = tmp_path / "beam-runners-flink-1.19-job-server-2.62.0-launcher.jar"
    jar.write_bytes(b"")
    code = main(
        [
            "bench",
            "kafka",
            "--bootstrap-servers",
            "127.0.0.1:9",
            "--beam-stream",
            "flink",
            f"--flink-job-server-jar={jar}",
        ]
    )
    assert code == 2
    err = caplog.text
    assert "no KafkaIO expansion service at" in err
    assert "fetch-job-server.sh --kafka-expansion-service" in err


def test_entry_latency_is_the_record_time_minus_the_entrys_emitted_at() -> None:
    """An entry emitted (its event sent) at 1,000 ms and sent by the job at 1,450 ms: 450 ms;
    an entry emitted before the paced load began, or a tombstone, is no latency."""
    entry = FrontierEntry(
        url="https://a.example/",
        host="a.example",
        priority=0.5,
        strategy="ieca",
        crawl_id="c",
        cycle=0,
        via=None,
        emitted_at=1_000,
    )
    value = encode_record(entry)
    assert entry_latency(1_450, value, since_ms=900) == 450
    assert entry_latency(1_450, value, since_ms=1_001) is None
    assert entry_latency(1_450, None, since_ms=0) is None


def test_percentiles_of_1_to_100() -> None:
    """Median of 1..100: (50 + 51) / 2; p99: the value at index ⌊0.99 · 99⌋ = 98, i.e. 99."""
    assert percentiles(list(range(1, 101))) == (50.5, 99)
    p50, p99 = percentiles([])
    assert p50 != p50 and p99 != p99  # nan: no entries


def test_latency_by_send_time_takes_the_median_of_each_third_in_send_order() -> None:
    """Seven entries given out of order: sent at 1..7 s with latencies rising by 1 s; thirds
    of 7 cut at 2 and 4: sends 1–2 (median of 10, 11 = 10.5), 3–4 (12, 13: 12.5), 5–7
    (14, 15, 16: 15)."""
    sent = [(t * 1000, (t + 9) * 1000) for t in (7, 3, 1, 5, 2, 6, 4)]
    assert by_send_time(sent) == [10_500, 12_500, 15_000]
    empty, one = by_send_time([(0, 5)], parts=2)
    assert empty != empty and one == 5  # an empty part: nan


def test_a_vertex_lags_by_its_least_subtask_input_watermark() -> None:
    # the REST API's /jobs/<id>/vertices/<v>/watermarks: one entry per subtask
    marks = [
        {"id": "0.currentInputWatermark", "value": "1000000"},
        {"id": "1.currentInputWatermark", "value": "997500"},
    ]
    assert vertex_lag(marks, now_ms=1_001_000) == 3.5  # (1,001,000 − 997,500) ms
    none_yet = [*marks, {"id": "2.currentInputWatermark", "value": "-9223372036854775808"}]
    assert vertex_lag(none_yet, now_ms=1_001_000) is None  # a subtask without one yet
    assert vertex_lag([], now_ms=1_001_000) is None  # a source: no input watermark


def test_the_lags_report_each_vertex_median_and_max_along_the_pipeline() -> None:
    lags = WatermarkLags("127.0.0.1:9", set(), every_s=3.0)
    lags.lags = {"[2]Frontier/{Update}": [3.0, 4.0], "[4]Frontier/{Repeats}": [1.0, 2.0, 9.0]}
    lines = lags.lines()
    assert "3 samples, one every 3 s" in lines[0]
    # the least median first: the steps in their order along the pipeline
    assert lines[1].split() == ["2.0", "s", "9.0", "s", "[4]Frontier/{Repeats}"]
    assert lines[2].split() == ["3.5", "s", "4.0", "s", "[2]Frontier/{Update}"]
    assert WatermarkLags("127.0.0.1:9", set()).lines() == ["watermark lag per vertex: no sample"]


def test_the_pace_note_gives_the_last_third_against_the_first() -> None:
    assert "+2,500 ms" in pace_note([1_000.0, 5_000.0, 3_500.0])
    assert "-900 ms" in pace_note([3_952.0, 3_223.0, 3_052.0])
    assert pace_note([]) == ""


def test_the_frontier_matches_at_the_record_after_which_it_holds_the_expected_keys() -> None:
    """Expected {a, b}: a, then c (not expected), then b leave a key too many; c's tombstone
    at 130 makes the topic hold exactly {a, b}; a later update of a keeps the match at 130;
    a's tombstone breaks it, and a's return at 160 makes it again."""
    match = FrontierMatch({b"a", b"b"})
    for at, key, value in [(100, b"a", b"1"), (110, b"c", b"1"), (120, b"b", b"1")]:
        match.add(at, key, value)
        assert match.matched_ms is None
    assert (match.missing, match.extra) == (0, 1)
    match.add(130, b"c", None)
    assert match.matched_ms == 130
    match.add(140, b"a", b"2")  # a change of a key already held: still the same keys
    assert match.matched_ms == 130
    match.add(150, b"a", None)
    assert match.matched_ms is None and match.missing == 1
    match.add(160, b"a", b"3")
    assert match.matched_ms == 160
    assert (match.first_ms, match.records) == (100, 7)


def test_a_new_expectation_is_matched_against_the_keys_already_read() -> None:
    """After {a} matched, expecting {a, b} leaves b missing; expecting {} leaves a too many;
    expecting {a} again matches at once, at the last record read."""
    match = FrontierMatch({b"a"})
    match.add(100, b"a", b"1")
    match.add(105, None, b"x")  # a record without a key counts, holds no key
    assert match.matched_ms == 100
    match.expect({b"a", b"b"})
    assert (match.missing, match.extra, match.matched_ms) == (1, 0, None)
    match.expect(set())
    assert (match.missing, match.extra, match.matched_ms) == (0, 1, None)
    match.expect({b"a"})
    assert match.matched_ms == 105
    assert match.records == 2
