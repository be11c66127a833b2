"""The Beam pipeline options every form of the job builds from its `beam_args`.

One adjustment for Prism: its runner-initiated splits are turned off
(`prism_disable_sdf_split`). Prism 2.75 splits a bundle that shows no progress between two
progress reports, stateful steps with timers included, and drops the watermark holds of
the timers it moves to the residual (apache/beam#35771, "Unexpected split on a bundle with
timers" in its log): on a loaded machine the streaming form then lost the outputs of its
last clock windows. Without splits a slow bundle simply runs to its end.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions, StandardOptions

PRISM_NO_SPLITS = "prism_disable_sdf_split"


def pipeline_options(beam_args: Sequence[str] | None) -> PipelineOptions:
    """`PipelineOptions` of `beam_args`, with Prism's runner-initiated splits off when the
    runner is Prism."""
    options = PipelineOptions(list(beam_args or []))
    runner = options.view_as(StandardOptions).runner
    if runner is not None and "prism" in str(runner).lower():
        options.view_as(DebugOptions).add_experiment(PRISM_NO_SPLITS)
    return options
