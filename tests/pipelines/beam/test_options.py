"""The pipeline options of every Beam form: Prism's runner-initiated splits are off, and the
option that keeps a job on the session cluster from uploading jars reaches the job server."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DebugOptions

from frontierflow.pipelines.beam.options import CLUSTER_CLASSPATH, PRISM_NO_SPLITS, pipeline_options


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
