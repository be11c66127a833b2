"""The pipeline options of every Beam form: Prism's runner-initiated splits are off, a
streaming job on Flink gets short bundles and a frequent watermark unless it sets its own,
and the option that keeps a job on the session cluster from uploading jars reaches the job
server. A service Beam starts for a run (a job server, an expansion service) that ends at
its start is started again."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions
from apache_beam.runners.direct.direct_runner import DirectRunner
from apache_beam.runners.portability.flink_runner import FlinkJarJobServer

from frontierflow.pipelines.beam.options import (
    CLUSTER_CLASSPATH,
    FLINK_STREAMING_DEFAULTS,
    PRISM_NO_SPLITS,
    SERVICE_START_ATTEMPTS,
    SERVICE_START_FAILED,
    pipeline_options,
    run_pipeline,
)


def _experiments(args: list[str]) -> list[str]:
    return pipeline_options(args).view_as(DebugOptions).experiments or []


def test_prism_runs_without_runner_initiated_splits() -> None:
    assert PRISM_NO_SPLITS in _experiments(["--runner=PrismRunner"])
    assert PRISM_NO_SPLITS in _experiments(["--runner", "PrismRunner", "--experiments=x"])
    assert "x" in _experiments(["--runner=PrismRunner", "--experiments=x"])


def test_other_runners_are_left_alone() -> None:
    assert PRISM_NO_SPLITS not in _experiments(["--runner=FlinkRunner"])
    assert PRISM_NO_SPLITS not in _experiments(["--runner=FnApiRunner"])
    assert PRISM_NO_SPLITS not in _experiments([])


def test_the_cluster_class_path_option_reaches_the_job_server() -> None:
    """Python's SDK does not know Beam Java's `pipeline_resources_detector_factory_class`:
    unknown, it would be dropped ("Discarding unparseable args") and the job would upload
    the job server's jars. `FlinkClusterOptions` declares it, so it travels with the job."""
    options = pipeline_options(["--runner=FlinkRunner", CLUSTER_CLASSPATH])
    sent = options.get_all_options(drop_default=True)
    assert sent["pipeline_resources_detector_factory_class"] == (
        "frontierflow.flink.ClusterClassPath"
    )


def _sent(args: list[str]) -> dict[str, object]:
    """What the portable runner sends the job server (the flags Python's SDK does not
    know included, as the job server's own description of its options makes them)."""
    return pipeline_options(args).get_all_options(retain_unknown_options=True)


def test_a_streaming_job_on_flink_gets_the_forms_bundle_bounds_unless_it_sets_its_own() -> None:
    assert [d.split("=")[0] for d in FLINK_STREAMING_DEFAULTS] == [
        "--max_bundle_time_mills",
        "--max_bundle_size",
        "--auto_watermark_interval",
    ]
    sent = _sent(["--runner=FlinkRunner", "--streaming"])
    assert (sent["max_bundle_time_mills"], sent["max_bundle_size"]) == ("100", "1000")
    assert sent["auto_watermark_interval"] == "50"
    own = _sent(["--runner=FlinkRunner", "--streaming", "--max_bundle_time_mills=500"])
    assert (own["max_bundle_time_mills"], own["max_bundle_size"]) == ("500", "1000")


def test_batch_jobs_and_other_runners_keep_the_runner_defaults() -> None:
    for args in (["--runner=FlinkRunner"], ["--runner=PrismRunner", "--streaming"], []):
        assert "max_bundle_time_mills" not in _sent(args)


class _FailingStarts(DirectRunner):
    """A runner whose first `fails` runs end as Beam's do when a service it starts exits
    before it answers; then it runs the pipeline."""

    def __init__(self, fails: int, message: str = SERVICE_START_FAILED + " with error 0"):
        super().__init__()
        self.fails = fails
        self.message = message
        self.runs = 0

    def run_pipeline(self, pipeline: Any, options: Any) -> Any:
        self.runs += 1
        if self.runs <= self.fails:
            raise RuntimeError(self.message)
        return super().run_pipeline(pipeline, options)


def _sum_to(path: Path) -> Callable[[beam.Pipeline], object]:
    def build(pipeline: beam.Pipeline) -> object:
        return (
            pipeline
            | beam.Create([1, 2, 3])
            | beam.CombineGlobally(sum)
            | beam.Map(lambda total: path.write_text(str(total)))
        )

    return build


def test_a_service_that_ends_at_its_start_is_started_again(tmp_path: Path) -> None:
    """Two failed starts, then the third attempt builds the pipeline anew and runs it once."""
    runner = _FailingStarts(fails=SERVICE_START_ATTEMPTS - 1)
    out = tmp_path / "sum"
    run_pipeline(pipeline_options([]), _sum_to(out), runner=runner)
    assert runner.runs == SERVICE_START_ATTEMPTS
    assert out.read_text() == "6"


def test_the_last_failed_start_and_other_errors_are_raised(tmp_path: Path) -> None:
    runner = _FailingStarts(fails=SERVICE_START_ATTEMPTS)
    with pytest.raises(RuntimeError, match=SERVICE_START_FAILED):
        run_pipeline(pipeline_options([]), _sum_to(tmp_path / "a"), runner=runner)
    assert runner.runs == SERVICE_START_ATTEMPTS
    other = _FailingStarts(fails=1, message="the job failed")
    with pytest.raises(RuntimeError, match="the job failed"):
        run_pipeline(pipeline_options([]), _sum_to(tmp_path / "b"), runner=other)
    assert other.runs == 1
    assert not (tmp_path / "b").exists()


def test_the_flink_job_server_on_a_taken_port_ends_with_that_error(
    flink_job_server_jar: Path,
) -> None:
    """Why the retry exists: Beam's Flink job server, given a port another process holds,
    logs "Failed to bind" and exits with status 0, and Beam raises the error the retry
    looks for."""
    taken = socket.socket()
    taken.bind(("localhost", 0))
    taken.listen()
    port = taken.getsockname()[1]
    options = PipelineOptions(
        [
            "--flink_master=[local]",
            f"--flink_job_server_jar={flink_job_server_jar}",
            f"--job_port={port}",
        ]
    )
    server = FlinkJarJobServer(options)
    try:
        with pytest.raises(RuntimeError, match=SERVICE_START_FAILED):
            server.start()
    finally:
        server.stop()
        taken.close()
