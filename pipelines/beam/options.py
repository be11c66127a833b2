"""The Beam pipeline options every form of the job builds from its `beam_args`.

One adjustment for Prism: its runner-initiated splits are turned off
(`prism_disable_sdf_split`). Prism 2.75 splits a bundle that shows no progress between two
progress reports, stateful steps with timers included, and drops the watermark holds of
the timers it moves to the residual (apache/beam#35771, "Unexpected split on a bundle with
timers" in its log): on a loaded machine the streaming form then lost the outputs of its
last clock windows. Without splits a slow bundle simply runs to its end.

On Flink, the unbounded form runs with short bundles and a frequent watermark unless the
user says otherwise (`FLINK_STREAMING_DEFAULTS`): Beam's Flink runner holds a stage's output
watermark while its bundle is open, and each timer-ordered step of the form waits for its
input watermark to pass a window's due, so with the runner's defaults a window's messages
took a watermark advance per step to cross the five steps. Measured on the session cluster
(`frontierflow bench kafka --beam-stream flink-cluster-2 --events 2000`, the same loaded
machine, one run each): p50 latency from produce to frontier entry 88 s with the runner's
defaults, 36 s with bundles of at most 100 ms, 19 s with the defaults below; the net rate
moved within the noise of the runs (43–69 events/s).

One option Python's SDK does not know: `--pipeline_resources_detector_factory_class`
(`FlinkClusterOptions`), which tells Beam's Flink job server which jars a job uploads. The
session cluster of `infra/flink/cluster.sh` has the job server's class path as its own, so
a job sent there with `CLUSTER_CLASSPATH` uploads none (`infra/flink/README.md`, "Jobs that
upload nothing").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineResult

_LOG = logging.getLogger(__name__)

PRISM_NO_SPLITS = "prism_disable_sdf_split"
CLUSTER_CLASSPATH = (
    "--pipeline_resources_detector_factory_class=frontierflow.flink.ClusterClassPath"
)
"""Beam option: the job stages no jars, its classes are on the Flink cluster's class path
(the class is built by `infra/flink/fetch-job-server.sh`)."""


FLINK_STREAMING_DEFAULTS = (
    "--max_bundle_time_mills=100",
    "--max_bundle_size=1000",
    "--auto_watermark_interval=50",
)
"""Beam's Flink runner options (described to Python by its job server) the unbounded form
gets on Flink unless its `beam_args` set them: a bundle ends after 100 ms or 1,000
elements, and the source emits its watermark every 50 ms. Measured at a million URLs in
state over a minute of paced load (`docs/results/beam.md`, "Bundles, and a minute of
paced load"): bundles of 20 ms or 100 elements could not keep up with 80 events/s (the
latency rose all minute) where these held it at ~9 s, and carried 0.6× their net rate:
every bundle costs both sides a round trip whatever it holds."""

SERVICE_START_FAILED = "Service failed to start up"
"""The start of the `RuntimeError` Beam raises when a service it starts as a process (a
Flink job server, a Kafka expansion service, Prism) ends before it answers."""
SERVICE_START_ATTEMPTS = 3


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
    runner is Prism, and `FLINK_STREAMING_DEFAULTS` for what a streaming job on Flink does
    not set itself."""
    args = list(beam_args or [])
    options = PipelineOptions(args)
    standard = options.view_as(StandardOptions)
    runner = str(standard.runner or "").lower()
    if "flink" in runner and standard.streaming:
        given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
        extra = [d for d in FLINK_STREAMING_DEFAULTS if d.split("=", 1)[0] not in given]
        if extra:
            options = PipelineOptions([*args, *extra])
    if "prism" in runner:
        options.view_as(DebugOptions).add_experiment(PRISM_NO_SPLITS)
    return options


def run_pipeline(
    options: PipelineOptions,
    build: Callable[[beam.Pipeline], object],
    *,
    runner: Any = None,
    wait: bool = True,
) -> PipelineResult:
    """Build a pipeline with `build`, run it and (with `wait`) wait for it: what
    `with beam.Pipeline(...)` does, built again and run again, up to
    `SERVICE_START_ATTEMPTS` times, when a service Beam starts for it ends before it answers.

    Beam picks a free port for such a service, closes it and passes the number on; another
    process can take the port in between, and then Beam's Flink job server logs "Failed to
    bind" and exits with status 0 (a Kafka expansion service or Prism can meet the same
    race). The services start while the pipeline is built (expansion) or before it is
    submitted (job server), so nothing has run when this error is raised, and a new attempt
    picks new ports."""
    for attempt in range(1, SERVICE_START_ATTEMPTS + 1):
        try:
            return _run_once(options, build, runner, wait)
        except RuntimeError as exc:
            if not str(exc).startswith(SERVICE_START_FAILED) or attempt == SERVICE_START_ATTEMPTS:
                raise
            _LOG.warning("a Beam service ended at its start (%s); attempt %d", exc, attempt + 1)
    raise AssertionError("unreachable")


def _run_once(
    options: PipelineOptions, build: Callable[[beam.Pipeline], object], runner: Any, wait: bool
) -> PipelineResult:
    pipeline = beam.Pipeline(runner=runner, options=options)
    if not wait:
        build(pipeline)
        return pipeline.run()
    with pipeline:  # as Beam runs it: the services it starts live until the run ends
        build(pipeline)
    return pipeline.result
