"""The revisit evaluation's outputs: runs.csv (one row per run), summary.md (a table per
download rate, the mean over the windows) and, when tuning, tuning.md (the constants chosen
for each policy and rate)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import astuple, fields
from pathlib import Path

import numpy as np

from frontierflow.pipelines.evaluation.revisit_eval import (
    RevisitEvaluation,
    RevisitResult,
    best_constants,
)

COLUMNS = (
    ("relevant", "relevant", "{:.1f}"),
    ("mean delay (min)", "delay_min", "{:.2f}"),
    ("median delay (min)", "median_delay_min", "{:.2f}"),
    ("freshness", "freshness", "{:.3f}"),
    ("sent eff", "sent_efficiency", "{:.3f}"),
    ("relevant / 1,000 downloads", "relevant_per_1000", "{:.2f}"),
    ("copy freshness", "copy_freshness", "{:.3f}"),
    ("downloads", "downloads", "{:.0f}"),
    ("revisits", "revisits", "{:.0f}"),
    ("probes", "probes", "{:.0f}"),
)


def _mean_std(rows: Sequence[RevisitResult], attr: str) -> tuple[float, float]:
    values = np.array([float(getattr(r, attr)) for r in rows])
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def summary_table(results: Sequence[RevisitResult], download_ms: int) -> list[str]:
    """Rows: policies (and their constants when several were run); cells: mean over the
    windows, ± the standard deviation for relevant and the mean delay."""
    groups: dict[tuple[str, str, str], list[RevisitResult]] = {}
    for r in results:
        if r.download_ms == download_ms:
            groups.setdefault((r.policy, r.seed, r.constants), []).append(r)
    several = len({(p, s) for p, s, _ in groups}) < len(groups)
    seeds = len({s for _, s, _ in groups if s}) > 1
    head = "| policy | " + " | ".join(label for label, _, _ in COLUMNS) + " |"
    lines = [head, "|---|" + "---:|" * len(COLUMNS)]
    for (policy, seed, constants), rows in groups.items():
        cells = []
        for _, attr, fmt in COLUMNS:
            mean, std = _mean_std(rows, attr)
            cell = fmt.format(mean)
            if attr in ("relevant", "delay_min") and len(rows) > 1:
                cell += " ± " + fmt.format(std)
            cells.append(cell)
        name = f"{policy} from {seed}" if seeds and seed else policy
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
        "- mean over the windows (± standard deviation)",
        "",
    ]
    for rate in e.download_ms:
        lines += [f"## one download every {rate / 1000:g} s", "", *summary_table(results, rate), ""]
    if e.grid:
        lines += ["## constants chosen (most relevant, then least mean delay)", ""]
        lines += ["| download every | policy | constants |", "|---:|---|---|"]
        for (rate, policy), constants in sorted(best_constants(results).items()):
            if constants:
                lines.append(f"| {rate / 1000:g} s | {policy} | `{constants}` |")
        lines.append("")
    else:
        lines += ["## constants", "", "| policy | constants |", "|---|---|"]
        for policy, constants in dict.fromkeys((r.policy, r.constants) for r in results):
            if constants:
                lines.append(f"| {policy} | `{constants}` |")
        lines.append("")
    (out / ("tuning.md" if e.grid else "summary.md")).write_text("\n".join(lines))
