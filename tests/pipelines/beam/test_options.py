"""The pipeline options of every Beam form: Prism's runner-initiated splits are off, a
streaming job on Flink gets short bundles and a frequent watermark unless it sets its own,
and the option that keeps a job on the session cluster from uploading jars reaches the job
server."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DebugOptions

from frontierflow.pipelines.beam.options import (
    CLUSTER_CLASSPATH,
    FLINK_STREAMING_DEFAULTS,
    PRISM_NO_SPLITS,
    pipeline_options,
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
