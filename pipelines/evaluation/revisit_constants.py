"""The learned revisit policies' constants: read as NAME=VALUE, written back the same way,
and the values `frontierflow simulate revisits --tune` chose on the tuning windows, per
download rate (docs/results/revisits.md has the grids)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from frontierflow.pipelines.evaluation.revisit_policy import Policy, RevisitPolicySettings
from frontierflow.state.revisits import RevisitSettings

_POLICY_FIELDS = frozenset(f.name for f in fields(RevisitPolicySettings)) - {"revisit"}
_RECORD_FIELDS = frozenset(f.name for f in fields(RevisitSettings))
CONSTANT_NAMES = tuple(sorted(_POLICY_FIELDS | _RECORD_FIELDS))


def _value(name: str, text: str) -> float | int | None:
    if text.strip().lower() == "none":
        if name != "half_life_ms":
            raise ValueError(f"{name} cannot be none")
        return None
    return float(text) if name in ("exploration", "skip_below") else int(text)


def with_constants(base: RevisitPolicySettings, items: Mapping[str, str]) -> RevisitPolicySettings:
    """`base` with NAME=VALUE constants (names: `CONSTANT_NAMES`; `half_life_ms` may be
    `none`); ValueError for an unknown name or a bad value."""
    revisit = base.revisit
    outer: dict[str, Any] = {}
    for name, text in items.items():
        if name in _RECORD_FIELDS:
            changed: dict[str, Any] = {name: _value(name, text)}
            revisit = replace(revisit, **changed)
        elif name in _POLICY_FIELDS:
            outer[name] = _value(name, text)
        else:
            raise ValueError(f"unknown constant {name!r}; known: {', '.join(CONSTANT_NAMES)}")
    return replace(base, revisit=revisit, **outer)


def describe(settings: RevisitPolicySettings) -> str:
    """The constants as NAME=VALUE,… (what `with_constants` reads back; `skip_below` only
    when links are skipped, `stale_ms`, `worth_ms` and `floor_ms` only when set)."""
    r = settings.revisit
    half = "none" if r.half_life_ms is None else str(r.half_life_ms)
    skip = f",skip_below={settings.skip_below:g}" if settings.skip_below > 0 else ""
    for name in ("stale_ms", "worth_ms", "floor_ms"):
        if getattr(settings, name) > 0:
            skip += f",{name}={getattr(settings, name)}"
    return (
        f"exploration={settings.exploration:g},plan_ms={settings.plan_ms},"
        f"half_life_ms={half},min_revisits={r.min_revisits},probe_ms={r.probe_ms},"
        f"probe_max_ms={r.probe_max_ms}{skip}"
    )


BASE = RevisitPolicySettings(
    revisit=RevisitSettings(half_life_ms=None, min_revisits=4, probe_ms=15 * 60_000),
    exploration=0.02,
)
"""Where the tuning starts: the constants it does not vary (`plan_ms`, `probe_ms`,
`probe_max_ms`) are these."""


def _chosen(text: str) -> RevisitPolicySettings:
    return with_constants(BASE, dict(item.split("=", 1) for item in text.split(",")))


TUNED: dict[int, dict[Policy, RevisitPolicySettings]] = {
    10_000: {
        Policy.PROPORTIONAL: _chosen("exploration=0.01,half_life_ms=none,min_revisits=4"),
        Policy.OPTIMAL_FRESHNESS: _chosen("exploration=0.01,half_life_ms=none,min_revisits=4"),
        Policy.DISCOVERY: _chosen(
            "exploration=0.01,half_life_ms=none,min_revisits=1,skip_below=0.15,"
            "stale_ms=86400000,worth_ms=86400000"
        ),
    },
    300_000: {
        Policy.PROPORTIONAL: _chosen("exploration=0.02,half_life_ms=86400000,min_revisits=2"),
        Policy.OPTIMAL_FRESHNESS: _chosen("exploration=0.02,half_life_ms=86400000,min_revisits=2"),
        Policy.DISCOVERY: _chosen(
            "exploration=0.01,half_life_ms=86400000,min_revisits=2,skip_below=0.15,"
            "stale_ms=86400000,worth_ms=86400000"
        ),
    },
    900_000: {
        Policy.PROPORTIONAL: _chosen("exploration=0.02,half_life_ms=none,min_revisits=1"),
        Policy.OPTIMAL_FRESHNESS: _chosen("exploration=0.05,half_life_ms=none,min_revisits=2"),
        Policy.DISCOVERY: _chosen(
            "exploration=0.02,half_life_ms=86400000,min_revisits=1,skip_below=0.2,"
            "stale_ms=86400000,worth_ms=3600000,floor_ms=86400000"
        ),
    },
    1_800_000: {
        Policy.PROPORTIONAL: _chosen("exploration=0.05,half_life_ms=none,min_revisits=1"),
        Policy.OPTIMAL_FRESHNESS: _chosen("exploration=0.02,half_life_ms=none,min_revisits=1"),
        Policy.DISCOVERY: _chosen(
            "exploration=0.02,half_life_ms=86400000,min_revisits=1,skip_below=0.2,"
            "stale_ms=86400000,worth_ms=14400000"
        ),
    },
}
"""Per download rate (ms), the constants `tune` chose for each learned policy on the tuning
windows (most stories found, then least mean delay); the weblog fleet on the learned
schedule takes the discovery rule's."""


def tuned_constants(download_ms: int) -> dict[Policy, RevisitPolicySettings]:
    """The constants chosen at `download_ms`, or at the nearest rate tuned (by ratio);
    `BASE` for every learned policy when none was."""
    learned = [p for p in Policy if p.learns]
    if not TUNED:
        return dict.fromkeys(learned, BASE)
    rate = min(TUNED, key=lambda r: abs(math.log(r / download_ms)))
    chosen = dict(TUNED[rate])
    chosen.setdefault(Policy.FLEET_LEARNED, chosen.get(Policy.DISCOVERY, BASE))
    return {p: chosen.get(p, BASE) for p in learned}
