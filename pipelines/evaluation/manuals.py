"""A wider development set for focused crawling: Debian manuals of other kinds than the four of
the main web, each crawled as a web of its own, with four topics each split once into a
development half and a report half.

Constants may be chosen on the development half (and on the main web's five topics); the
report half is crawled only with every constant fixed, so that a result on it says how the
crawler does on manuals and topics it was not tuned on. The split is mechanical and was fixed
before any crawl of these manuals: of each manual's four topics, the first two in
alphabetical order of their names are development, the other two report. Relevance is the
main evaluation's calibrated judge (Akbari Torkestani 2012, eqs. 4–5: similarity ≥ 0.5 with
≥ 5 keyword occurrences); each manual's budget per cycle is about a quarter of its pages.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from frontierflow.connectors.debiandocs import debian_docs_dir
from frontierflow.connectors.topicalweb import load_web
from frontierflow.pipelines.evaluation.focused import (
    LABELS,
    FocusedSetup,
    TopicResult,
    paired_t_test,
    run_focused,
)
from frontierflow.state.relevance import Judge, Topic

log = logging.getLogger(__name__)

Half = Literal["development", "report"]
HALVES: tuple[Half, ...] = ("development", "report")
CALIBRATED_JUDGE = Judge(threshold=0.5, min_occurrences=5)
"""The judge of the main evaluation (docs/results/focused.md)."""
BASE_URL = "http://localhost/"
"""Where a folder web is served (`frontierflow.connectors.topicalweb.web_roots`)."""


@dataclass(frozen=True, slots=True)
class Manual:
    """One Debian documentation package read as a web of its own."""

    name: str
    package: str
    """The Debian package (`infra/debian-docs/fetch.sh PACKAGE`)."""
    kind: str
    root: str
    """The HTML root under the package's folder."""
    seeds: tuple[str, ...]
    """Seed pages, relative to the root."""
    budget: int
    """Downloads per cycle: about a quarter of the pages."""
    topics: tuple[Topic, ...]
    """Four topics, in alphabetical order of their names."""

    def __post_init__(self) -> None:
        names = [t.name for t in self.topics]
        if len(names) != 4 or names != sorted(names):
            raise ValueError(f"{self.name}: four topics in alphabetical order, got {names}")

    def folder(self, docs_dir: Path | None = None) -> Path:
        return (docs_dir if docs_dir is not None else debian_docs_dir()) / self.package / self.root

    def seed_urls(self) -> tuple[str, ...]:
        return tuple(BASE_URL + seed for seed in self.seeds)

    def half(self, half: Half) -> tuple[Topic, ...]:
        """The first two topics are development, the other two report."""
        return self.topics[:2] if half == "development" else self.topics[2:]


def _topics(**keywords: str) -> tuple[Topic, ...]:
    return tuple(Topic.parse(words, name=name) for name, words in sorted(keywords.items()))


MANUALS: tuple[Manual, ...] = (
    Manual(
        "django",
        "python-django-doc",
        "framework manual",
        "usr/share/doc/python-django-doc/html",
        ("index.html",),
        170,
        _topics(
            auth="authentication user users permission permissions password",
            cache="cache caching cached backend",
            forms="form forms field fields widget validation",
            templates="template templates tag tags context render",
        ),
    ),
    Manual(
        "glib",
        "libglib2.0-doc",
        "library reference",
        "usr/share/gtk-doc/html",
        ("gio/index.html", "glib/index.html", "gobject/index.html"),
        100,
        _topics(
            files="file files directory path stream",
            mainloop="loop source sources main context event",
            signals="signal signals handler emit closure",
            strings="string strings utf8 unicode character",
        ),
    ),
    Manual(
        "git",
        "git-doc",
        "user guide and command reference",
        "usr/share/doc/git-doc",
        ("index.html",),
        60,
        _topics(
            branches="branch branches merge rebase",
            config="config configuration variable option",
            remotes="remote push fetch pull repository",
            tags="tag tags annotated signed",
        ),
    ),
)


def manual(name: str) -> Manual:
    for m in MANUALS:
        if m.name == name:
            return m
    raise ValueError(f"unknown manual {name!r}; known: {', '.join(m.name for m in MANUALS)}")


def run_manuals(
    half: Half,
    setup: FocusedSetup,
    out_dir: Path,
    *,
    manuals: Sequence[Manual] = MANUALS,
    budget_scale: float = 1.0,
    docs_dir: Path | None = None,
    cache: bool = True,
) -> dict[str, list[TopicResult]]:
    """Crawl each manual's topics of `half` with `setup` (its budget and seeds replaced by the
    manual's, the budget times `budget_scale`); one folder of results per manual. `cache`:
    keep each parsed manual in the parse cache (`load_web`)."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    if not 0.0 < budget_scale <= 1.0:
        raise ValueError(f"budget_scale must be in (0, 1], got {budget_scale}")
    results = {}
    for m in manuals:
        folder = m.folder(docs_dir)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"{folder} is missing: run infra/debian-docs/fetch.sh {m.package}"
            )
        budget = max(setup.points, round(m.budget * budget_scale))
        local = replace(setup, budget=budget, seeds=m.seed_urls())
        log.info("%s (%s): %s topics, budget %d", m.name, m.package, half, budget)
        web = load_web(str(folder), cache=cache)
        label = f"{m.package} ({m.kind}), {half} topics"
        results[m.name] = run_focused(web, m.half(half), local, out_dir / m.name, label)
    return results


MARGIN_LEARNERS = ("lafc-plus", "tres")
"""The learners whose margins a run reports, each in a table of its own."""
COMPARED = ("best-first", "lafc", "lafc-plus", "tres")
"""What a learner is measured against on every topic, those of them in the run: the bar
(best-first), faithful LAFC, LAFC+ and the TRES-style reinforcement learner (Kontogiannis
et al. 2021)."""


def _curve(result: TopicResult, strategy: str, cycle: int) -> tuple[float, ...] | None:
    for c in result.curves:
        if c.strategy == strategy and c.cycle == cycle:
            return c.precision
    return None


def margin_lines(
    results: dict[str, list[TopicResult]], setup: FocusedSetup, learner: str = "lafc-plus"
) -> list[str]:
    """Markdown: per manual, topic and cycle from the second on, `learner`'s mean precision
    over the checkpoints (precision at equal downloads), each rival's, the learner's relative
    margin (learner − rival) / rival and the paired t-test over the checkpoints (Akbari
    Torkestani 2012, Table 4); and whether the learner's curve mean rose from the cycle
    before."""
    present = [r for r in COMPARED if r in setup.strategies and r != learner]
    label = LABELS.get(learner, learner)
    head = f"| manual | topic | cycle | {label} | " + " | ".join(
        f"{r} | vs {r} (p)" for r in present
    )
    lines = [
        head + " | above the cycle before |",
        "|---|---|---:|---:|" + "---:|---:|" * len(present) + "---|",
    ]
    for name, topic_results in results.items():
        for result in topic_results:
            for cycle in range(1, setup.cycles):
                mine, before = _curve(result, learner, cycle), _curve(result, learner, cycle - 1)
                if mine is None or before is None:
                    continue
                mean = sum(mine) / len(mine)
                cells = [f"{mean:.3f}"]
                for rival in present:
                    theirs = _curve(result, rival, cycle)
                    if theirs is None:
                        cells += ["–", "–"]
                        continue
                    other = sum(theirs) / len(theirs)
                    _, p = paired_t_test(mine, theirs)
                    rel = f"{(mean - other) / other:+.1%}" if other > 0 else "–"
                    cells += [f"{other:.3f}", f"{rel} ({p:.3g})"]
                rose = "yes" if mean > sum(before) / len(before) else "no"
                lines.append(
                    f"| {name} | {result.topic} | {cycle + 1} | "
                    + " | ".join(cells)
                    + f" | {rose} |"
                )
    return lines


def write_margins(
    out_dir: Path, results: dict[str, list[TopicResult]], setup: FocusedSetup
) -> list[Path]:
    """One table of `margin_lines` per learner of MARGIN_LEARNERS in the run: LAFC+'s in
    `margins.md`, another's in `margins-<name>.md`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for learner in MARGIN_LEARNERS:
        if learner not in setup.strategies:
            continue
        path = out_dir / ("margins.md" if learner == "lafc-plus" else f"margins-{learner}.md")
        path.write_text("\n".join(margin_lines(results, setup, learner)) + "\n")
        paths.append(path)
    return paths
