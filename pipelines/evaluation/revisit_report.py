"""The revisit evaluation's outputs: runs.csv (one row per run), summary.md (a table per
download rate, the mean over the windows) and, when tuning, tuning.md (the constants chosen
for each policy and rate)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import astuple, fields
from pathlib import Path

import numpy as np

from frontierflow.pipelines.evaluation.revisit_eval import (
    RevisitEvaluation,
    RevisitResult,
    best_constants,
)
from frontierflow.pipelines.evaluation.revisit_policy import Policy

COLUMNS = (
    ("found", "found", "{:.1f}"),
    ("of published", "found_share", "{:.1%}"),
    ("mean delay (min)", "delay_min", "{:.2f}"),
    ("median delay (min)", "median_delay_min", "{:.2f}"),
    ("relevant", "relevant", "{:.1f}"),
    ("freshness", "freshness", "{:.3f}"),
    ("copy freshness", "copy_freshness", "{:.3f}"),
    ("sent eff", "sent_efficiency", "{:.3f}"),
    ("downloads", "downloads", "{:.0f}"),
    ("revisits", "revisits", "{:.0f}"),
    ("probes", "probes", "{:.0f}"),
)
FLEET_COLUMNS = (*COLUMNS[:6], COLUMNS[-3])
"""A fleet's run has no copies sampled, no sends counted in the window and no revisits."""
SPREAD = ("found_share", "delay_min")
"""Columns shown with their standard deviation over the runs."""


def _mean_std(rows: Sequence[RevisitResult], attr: str) -> tuple[float, float]:
    """Over the runs that have a value (a run that found nothing has no delay)."""
    values = np.array([float(getattr(r, attr)) for r in rows])
    values = values[~np.isnan(values)]
    if not len(values):
        return math.nan, 0.0
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def summary_table(
    results: Sequence[RevisitResult],
    download_ms: int,
    by_seed: bool = False,
    columns: Sequence[tuple[str, str, str]] = COLUMNS,
) -> list[str]:
    """Rows: policies (and their constants when several were run; their seeds with
    `by_seed`); cells: mean over the runs (windows, and seeds unless `by_seed`), ± the
    standard deviation for `SPREAD`."""
    groups: dict[tuple[str, str, str], list[RevisitResult]] = {}
    for r in results:
        if r.download_ms == download_ms:
            seed = r.seed if by_seed else ""
            groups.setdefault((r.policy, seed, r.constants), []).append(r)
    several = len({p for p, _, _ in groups}) < len({(p, c) for p, _, c in groups})
    head = "| policy | " + " | ".join(label for label, _, _ in columns) + " |"
    lines = [head, "|---|" + "---:|" * len(columns)]
    for (policy, seed, constants), rows in groups.items():
        cells = []
        for _, attr, fmt in columns:
            mean, std = _mean_std(rows, attr)
            cell = fmt.format(mean)
            if attr in SPREAD and len(rows) > 1:
                cell += " ± " + fmt.format(std)
            cells.append(cell)
        name = f"{policy} from {seed}" if seed else policy
        if several and constants:
            name += f" ({constants})"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_reports(
    out: Path, evaluation: RevisitEvaluation, results: Sequence[RevisitResult]
) -> None:
    e = evaluation
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([fl.name for fl in fields(RevisitResult)])
        for r in results:
            w.writerow(astuple(r))
    lines = [
        "# Revisit policies on the news site",
        "",
        f"- windows: {', '.join(s[:10] for s in e.starts)}; {e.days:g} days each after a "
        f"{e.warmup_days:g}-day warm-up",
        f"- topic: {', '.join(e.topic)}",
        f"- seeds of the learned policies and seed-only: {', '.join(e.seeds)}",
        "- mean over the runs: every window, and every seed of the policies that have one "
        "(± standard deviation)",
        "",
    ]
    revisits = [r for r in results if not Policy(r.policy).is_fleet]
    fleets = [r for r in results if Policy(r.policy).is_fleet]
    for rate in e.download_ms:
        lines += [f"## one download every {rate / 1000:g} s", ""]
        if revisits:
            lines += [*summary_table(revisits, rate), ""]
        if revisits and len(e.seeds) > 1:
            lines += ["### by seed", "", *summary_table(revisits, rate, True, COLUMNS[:3]), ""]
        if fleets:
            lines += ["### the weblog fleet, and the same fleet on the learned schedule", ""]
            lines += [*summary_table(fleets, rate, columns=FLEET_COLUMNS), ""]
    if e.grid:
        lines += ["## constants chosen (most stories found, then least mean delay)", ""]
        lines += ["| download every | policy | constants |", "|---:|---|---|"]
        for (rate, policy), constants in sorted(best_constants(results).items()):
            if constants:
                lines.append(f"| {rate / 1000:g} s | {policy} | `{constants}` |")
        lines.append("")
    else:
        lines += ["## constants", "", "| download every | policy | constants |", "|---:|---|---|"]
        used = dict.fromkeys((r.download_ms, r.policy, r.constants) for r in results)
        for rate, policy, constants in used:
            if constants:
                lines.append(f"| {rate / 1000:g} s | {policy} | `{constants}` |")
        lines.append("")
    (out / ("tuning.md" if e.grid else "summary.md")).write_text("\n".join(lines))
