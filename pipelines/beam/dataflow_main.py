"""The Dataflow Flex Template entry point: the Beam replay pipeline from template parameters.

The template launcher runs this file with the template's parameters (`--log`, `--out`,
`--strategy`, `--budget`, as declared in `infra/dataflow/metadata.json`) followed by the
pipeline options Dataflow adds (`--runner`, `--project`, `--region`, `--temp_location`, …).
The parameters are read here; every other argument goes to Beam as a pipeline option.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from frontierflow.pipelines.beam.replay import run_beam_replay


def build_parser() -> argparse.ArgumentParser:
    """The template parameters; their names are those of `infra/dataflow/metadata.json`."""
    parser = argparse.ArgumentParser(prog="dataflow_main", description=__doc__)
    parser.add_argument("--log", required=True, help="FetchEvent log: Avro container or JSONL")
    parser.add_argument(
        "--out", required=True, help="prefix of the -frontier, -state, -dead-letters files"
    )
    parser.add_argument("--strategy", default="ieca", help="ordering strategy (not PageRank)")
    parser.add_argument("--budget", type=int, default=1_000_000, help="crawl budget in pages")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """(template parameters, remaining arguments = Beam pipeline options)."""
    args, beam_args = build_parser().parse_known_args(list(argv))
    if args.budget < 1:
        raise ValueError(f"--budget must be >= 1, got {args.budget}")
    return args, beam_args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the replay pipeline on the runner the pipeline options name."""
    logging.getLogger().setLevel(logging.INFO)
    args, beam_args = parse_args(sys.argv[1:] if argv is None else argv)
    run_beam_replay(
        args.log,  # a str: Path would fold gs:// into gs:/
        strategy_name=args.strategy,
        out_prefix=args.out,
        budget=args.budget,
        beam_args=beam_args,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
