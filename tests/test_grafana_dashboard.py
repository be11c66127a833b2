"""The Grafana dashboard in infra/grafana, checked without Grafana: it parses, its panels are
well formed, every query names only metrics the job and the fetchers export (and every
one of those is on it), and the operator's guide (docs/guides/operators-page.md) documents each
metric name in its metric tables."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from frontierflow.connectors.fetcher.metrics import FetcherMetrics
from frontierflow.pipelines.embedded.live import LiveMetrics

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "infra" / "grafana" / "frontierflow-dashboard.json"
METRICS_GUIDE = ROOT / "docs" / "guides" / "operators-page.md"
METRIC = re.compile(r"\bfrontierflow_[a-z0-9_]+\b")
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}


def _exported(registry: CollectorRegistry) -> dict[str, str]:
    """Every series name `registry` exports → the name of its metric family."""
    names: dict[str, str] = {}
    for family in registry.collect():
        for suffix in SUFFIXES[family.type]:
            names[family.name + suffix] = family.name
    return names


def _panels() -> list[dict[str, Any]]:
    return json.loads(DASHBOARD.read_text())["panels"]


EXPORTED = {**_exported(LiveMetrics().registry), **_exported(FetcherMetrics().registry)}


def test_dashboard_is_well_formed() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
    (source,) = dashboard["__inputs"]
    assert source["pluginId"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["description"]
        assert panel["datasource"]["uid"] == "${" + source["name"] + "}"
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))


def test_every_query_uses_metrics_the_job_exports() -> None:
    used: set[str] = set()
    for panel in _panels():
        for target in panel.get("targets", ()):
            names = METRIC.findall(target["expr"])
            assert names, target["expr"]
            unknown = [n for n in names if n not in EXPORTED]
            assert not unknown, f"{panel['title']}: {unknown} not exported"
            assert target["expr"].count("(") == target["expr"].count(")")
            used.update(EXPORTED[n] for n in names)
    # and every metric the job and the fetchers export has a panel
    assert used == set(EXPORTED.values())


def test_metrics_guide_documents_every_metric_name() -> None:
    """Each metric the job and the fetchers export has a row in the guide's metric tables, and
    each row names a metric they export."""
    rows = [line for line in METRICS_GUIDE.read_text().splitlines() if line.startswith("| `")]
    named = [name for row in rows for name in METRIC.findall(row.split("|")[1])]
    families = set(EXPORTED.values())
    # a row names a series (`…_total`) or, for a histogram, its family (`…_seconds`)
    unknown = sorted(name for name in named if name not in EXPORTED and name not in families)
    assert not unknown, f"{METRICS_GUIDE.name} names metrics nobody exports: {unknown}"
    missing = sorted(families - {EXPORTED.get(name, name) for name in named})
    assert not missing, f"{METRICS_GUIDE.name} lacks {missing}"
