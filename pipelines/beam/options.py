"""The Beam pipeline options every form of the job builds from its `beam_args`.

One adjustment for Prism: its runner-initiated splits are turned off
(`prism_disable_sdf_split`). Prism 2.75 splits a bundle that shows no progress between two
progress reports, stateful steps with timers included, and drops the watermark holds of
the timers it moves to the residual (apache/beam#35771, "Unexpected split on a bundle with
timers" in its log): on a loaded machine the streaming form then lost the outputs of its
last clock windows. Without splits a slow bundle simply runs to its end.

One option Python's SDK does not know: `--pipeline_resources_detector_factory_class`
(`FlinkClusterOptions`), which tells Beam's Flink job server which jars a job uploads. The
session cluster of `infra/flink/cluster.sh` has the job server's class path as its own, so
a job sent there with `CLUSTER_CLASSPATH` uploads none (`infra/flink/README.md`, "Jobs that
upload nothing").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions, StandardOptions

PRISM_NO_SPLITS = "prism_disable_sdf_split"
CLUSTER_CLASSPATH = (
    "--pipeline_resources_detector_factory_class=frontierflow.flink.ClusterClassPath"
)
"""Beam option: the job stages no jars, its classes are on the Flink cluster's class path
(the class is built by `infra/flink/fetch-job-server.sh`)."""


class FlinkClusterOptions(PipelineOptions):
    """The Java option of Beam's runners that picks the jars a job uploads (Beam's Java
    `PipelineResourcesOptions`, which its job server does not describe to Python)."""

    @classmethod
    def _add_argparse_args(cls, parser: Any) -> None:
        parser.add_argument(
            "--pipeline_resources_detector_factory_class",
            default=None,
            help="Java class of the factory of the detector of the jars a job stages",
        )


def pipeline_options(beam_args: Sequence[str] | None) -> PipelineOptions:
    """`PipelineOptions` of `beam_args`, with Prism's runner-initiated splits off when the
    runner is Prism."""
    options = PipelineOptions(list(beam_args or []))
    runner = options.view_as(StandardOptions).runner
    if runner is not None and "prism" in str(runner).lower():
        options.view_as(DebugOptions).add_experiment(PRISM_NO_SPLITS)
    return options
