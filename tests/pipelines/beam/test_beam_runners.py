"""Smoke tests: each Beam runner the project uses runs a tiny pipeline here, offline.

* the local runner (FnApiRunner, what DirectRunner runs batch pipelines on);
* Prism, from ``infra/prism/build.sh`` (fixture ``prism_binary``);
* Flink (embedded mini cluster, RocksDB state backend from ``infra/flink/config.yaml``),
  from ``infra/flink/fetch-job-server.sh`` (fixture ``flink_job_server_jar``).

The Prism and Flink pipelines run a stateful DoFn (ReadModifyWriteStateSpec: a running
count per key), in LOOPBACK mode so that the SDK workers are this process. Beam must not
try to download anything: the ``no_downloads`` fixture makes every download path of Beam
fail the test, and the logs are checked for download attempts too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability import prism_runner
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.utils import subprocess_server

EVENTS = [("a", 1), ("b", 1), ("a", 1), ("c", 1), ("a", 1), ("b", 1)]
# Each key's running count, one output per input element.
EXPECTED_COUNTS = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]


class RunningCount(beam.DoFn):
    """Emits (key, n) where n counts the key's elements so far (state per key)."""

    COUNT = ReadModifyWriteStateSpec("count", VarIntCoder())

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):  # type: ignore[no-untyped-def]  # noqa: B008
        n = (count.read() or 0) + 1
        count.write(n)
        yield kv[0], n


class AppendToFile(beam.DoFn):
    """Appends each element to a local file (LOOPBACK workers are this process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def process(self, element):  # type: ignore[no-untyped-def]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{element[0]} {element[1]}\n")
        yield element


def run_stateful_count(options: PipelineOptions, out_file: Path, runner=None) -> None:  # type: ignore[no-untyped-def]
    with beam.Pipeline(runner=runner, options=options) as p:
        counts = (
            p
            | "Events" >> beam.Create(EVENTS)
            | "Count" >> beam.ParDo(RunningCount())
            | "Record" >> beam.ParDo(AppendToFile(str(out_file)))
        )
        assert_that(counts, equal_to(EXPECTED_COUNTS))
    # assert_that ran inside the pipeline; the file proves elements really went through.
    written = sorted(tuple(line.split()) for line in out_file.read_text().splitlines())
    assert written == sorted((k, str(n)) for k, n in EXPECTED_COUNTS)


DOWNLOAD_WORDS = ("downloading", "download ")


@pytest.fixture
def no_downloads(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Iterator[None]:
    """Fail on any attempt of Beam to download (or build) a runner; check the logs after."""

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError(f"Beam tried to download: {args!r}")

    monkeypatch.setattr(prism_runner, "urlopen", refuse)
    monkeypatch.setattr(prism_runner.PrismJobServer, "_install_from_source", staticmethod(refuse))
    monkeypatch.setattr(
        subprocess_server.JavaJarServer, "_download_jar_to_cache", classmethod(refuse)
    )
    caplog.set_level(logging.INFO)
    yield
    # At teardown caplog.records holds only the teardown's records: ask for the call's.
    records = caplog.get_records("setup") + caplog.get_records("call")
    attempts = [
        r.getMessage()
        for r in records
        if r.name.startswith("apache_beam")
        and any(w in r.getMessage().lower() for w in DOWNLOAD_WORDS)
    ]
    assert not attempts, f"Beam logged download attempts: {attempts}"


def java_launcher() -> str:
    java_home = os.environ.get("JAVA_HOME")
    return os.path.join(java_home, "bin", "java") if java_home else "java"


# ---------------------------------------------------------------- local runner


def test_local_runner_map(no_downloads: None) -> None:
    with beam.Pipeline(runner=FnApiRunner()) as p:
        doubled = p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
        assert_that(doubled, equal_to([2, 4, 6]))


def test_local_runner_stateful(no_downloads: None, tmp_path: Path) -> None:
    run_stateful_count(PipelineOptions([]), tmp_path / "out.txt", runner=FnApiRunner())


# ---------------------------------------------------------------- Prism


@pytest.mark.beam_runner
def test_prism_stateful(
    prism_binary: Path, no_downloads: None, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    options = PipelineOptions(
        [
            "--runner=PrismRunner",
            f"--prism_location={prism_binary}",
            "--environment_type=LOOPBACK",
        ]
    )
    run_stateful_count(options, tmp_path / "out.txt")
    # no_downloads has checked that nothing was fetched; Beam names the binary only when
    # it starts a Prism server, which an earlier test in the session may already have done
    messages = [r.getMessage() for r in caplog.records]
    started = [m for m in messages if "Using local prism binary" in m]
    assert all(str(prism_binary) in m for m in started)


# ---------------------------------------------------------------- Flink


@pytest.mark.slow
@pytest.mark.beam_runner
def test_flink_stateful_rocksdb(
    flink_job_server_jar: Path,
    flink_conf_dir: Path,
    no_downloads: None,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    options = PipelineOptions(
        [
            "--runner=FlinkRunner",
            "--flink_master=[local]",
            "--flink_version=1.19",
            f"--flink_job_server_jar={flink_job_server_jar}",
            f"--job_server_java_launcher={java_launcher()}",
            "--environment_type=LOOPBACK",
            "--parallelism=1",
            # Streaming mode keeps Beam state in Flink's keyed state backend (batch mode
            # does not use one); the backend comes from infra/flink/config.yaml.
            "--streaming",
            f"--flink_conf_dir={flink_conf_dir}",
        ]
    )
    run_stateful_count(options, tmp_path / "out.txt")
    job_server_log = "\n".join(
        r.getMessage() for r in caplog.records if r.name == "FlinkJarJobServer"
    )
    assert str(flink_job_server_jar) in "\n".join(r.getMessage() for r in caplog.records)
    assert "state backend as EmbeddedRocksDBStateBackend" in job_server_log
