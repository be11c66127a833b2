"""The development set of Debian manuals (pipelines/evaluation/manuals.py): the fixed split, a
crawl of a small manual written here, and, when the packages are cached, a reduced crawl of
a real one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from frontierflow.connectors.debiandocs import debian_docs_dir
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.focused import FocusedSetup
from frontierflow.pipelines.evaluation.manuals import (
    CALIBRATED_JUDGE,
    MANUALS,
    Manual,
    manual,
    margin_lines,
    run_manuals,
    write_margins,
)
from frontierflow.state.relevance import Topic


def test_the_split_is_the_first_two_topics_by_name_for_development() -> None:
    halves = {
        m.name: ([t.name for t in m.half("development")], [t.name for t in m.half("report")])
        for m in MANUALS
    }
    assert halves == {
        "django": (["auth", "cache"], ["forms", "templates"]),
        "glib": (["files", "mainloop"], ["signals", "strings"]),
        "git": (["branches", "config"], ["remotes", "tags"]),
    }
    assert {m.kind for m in MANUALS} == {
        "framework manual",
        "library reference",
        "user guide and command reference",
    }
    with pytest.raises(ValueError, match="alphabetical"):
        Manual("m", "p", "k", "r", ("index.html",), 10, tuple(reversed(MANUALS[0].topics)))
    with pytest.raises(ValueError, match="unknown manual"):
        manual("nope")


def _page(folder: Path, name: str, words: str, links: list[str]) -> None:
    anchors = "".join(f'<a href="{target}">x</a>' for target in links)
    (folder / name).write_text(f"<html><body><p>{words}</p>{anchors}</body></html>")


def _tiny_manual(tmp_path: Path) -> Manual:
    # index → a, b, c; a → d; b → e. "net" pages: a (5×), d (5×), e (5×).
    root = tmp_path / "pkg" / "html"
    root.mkdir(parents=True)
    net = " ".join(["net"] * 5)
    _page(root, "index.html", "start", ["a.html", "b.html", "c.html"])
    _page(root, "a.html", net, ["d.html"])
    _page(root, "b.html", "other", ["e.html"])
    _page(root, "c.html", "other", [])
    _page(root, "d.html", net, [])
    _page(root, "e.html", net, [])
    topics = tuple(Topic.parse("net", name=n) for n in ("a1", "a2", "b1", "b2"))
    return Manual("tiny", "pkg", "test", "html", ("index.html",), 4, topics)


def test_a_half_is_crawled_with_the_manuals_budget_and_seeds(tmp_path: Path) -> None:
    tiny = _tiny_manual(tmp_path)
    setup = FocusedSetup(
        strategies=("lafc-plus", "tres", "best-first", "bfs"), cycles=2, points=2, runs=1,
        judge=CALIBRATED_JUDGE,
    )  # fmt: skip
    results = run_manuals(
        "report", setup, tmp_path / "out", manuals=[tiny], docs_dir=tmp_path, cache=False
    )
    assert [r.topic for r in results["tiny"]] == ["b1", "b2"]
    # 6 pages, 3 relevant (a, d, e), all reachable from index.html
    assert [(r.relevant_in_web, r.relevant_reachable) for r in results["tiny"]] == [(3, 3)] * 2
    # breadth-first downloads index, a, b, c in each cycle: 1 relevant (a) of the first 2,
    # 1 of 4
    bfs = [c for c in results["tiny"][0].curves if c.strategy == "bfs"]
    assert [c.precision for c in bfs] == [(0.5, 0.25)] * 2
    assert (tmp_path / "out" / "tiny" / "summary.md").is_file()
    lines = margin_lines(results, setup)
    # header, rule, then one row per report topic for cycle 2
    assert len(lines) == 4 and lines[2].startswith("| tiny | b1 | 2 |")
    assert "| tres | vs tres (p) |" in lines[0]
    mine = margin_lines(results, setup, "tres")
    assert mine[0].startswith("| manual | topic | cycle | TRES-style | best-first |")
    assert "| lafc-plus | vs lafc-plus (p) |" in mine[0] and len(mine) == 4
    paths = write_margins(tmp_path / "margins", results, setup)
    assert [p.name for p in paths] == ["margins.md", "margins-tres.md"]
    tres = [c for c in results["tiny"][0].curves if c.strategy == "tres"]
    assert [c.downloaded for c in tres] == [4.0, 4.0]  # the whole budget, no page twice
    with pytest.raises(ValueError, match="budget_scale"):
        run_manuals("report", setup, tmp_path, manuals=[tiny], budget_scale=0.0)


@pytest.fixture(scope="module")
def git_doc() -> None:
    """git-doc (2 MB, the development set's smallest manual), fetched or found in the cache."""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        ["bash", str(root / "infra" / "debian-docs" / "fetch.sh"), "git-doc"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0 and not (debian_docs_dir() / "git-doc" / ".complete").is_file():
        pytest.skip(f"git-doc could not be fetched: {done.stderr[-300:]}")


@pytest.mark.slow
def test_reduced_development_crawl_of_a_real_manual(git_doc: None, tmp_path: Path) -> None:
    argv = [
        "simulate", "manuals", "--half", "development", "--manual", "git", "--budget-scale",
        "0.5", "--cycles", "2", "--runs", "1", "--points", "3", "--out", str(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    margins = (tmp_path / "margins.md").read_text().splitlines()
    # branches and config, cycle 2 each
    assert [line.split(" | ")[1] for line in margins[2:]] == ["branches", "config"]
    summary = (tmp_path / "git" / "summary.md").read_text()
    # 30 downloads a cycle (60 × 0.5): LAFC+ keeps every page's choice, the budget is used
    assert "| 30 / 30 |" in summary
