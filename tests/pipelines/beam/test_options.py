"""The pipeline options of every Beam form: Prism's runner-initiated splits are off."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DebugOptions

from frontierflow.pipelines.beam.options import PRISM_NO_SPLITS, pipeline_options


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
