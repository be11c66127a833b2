"""The unbounded form's revisit steps as plain functions (`beam.stream_revisits`): the repeat
step's rule, a host shard's window of visits, and the fold of a window's decision into a
URL's changes, worked by hand with `--revisit fixed:20m` (each download's page is due again
20 minutes after it)."""

from __future__ import annotations

from frontierflow.pipelines.beam.coders import FrontierChangeCoder
from frontierflow.pipelines.beam.stream_revisits import (
    REVISIT_INDEX,
    apply_with_revisits,
    decode_visit,
    encode_visit,
    revisit_fetch,
    window_decisions,
)
from frontierflow.pipelines.core.step import FetchKind
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import REVISIT_ECHO, FetchEvent, FrontierEntry
from frontierflow.state.revisit_schedule import parse_revisit

FIXED = parse_revisit("fixed:20m")
assert FIXED is not None
MINUTES_20 = 20 * 60_000
CHANGE = FrontierChangeCoder()


def _event(url: str, at: int, status: int = 200, echo: dict[str, str] | None = None) -> FetchEvent:
    return FetchEvent(
        url=url, fetched_at=at, status=status, fetcher_id="f", host="news.example",
        echo=echo or {}, outlinks=("https://news.example/a",),
    )  # fmt: skip


def test_the_repeat_steps_rule_tells_a_first_fetch_a_revisit_and_a_repeat() -> None:
    url = "https://news.example/"
    kind, known, visit = revisit_fetch(None, _event(url, 1_000), FIXED)
    assert kind is FetchKind.FIRST and visit is not None and known is not None
    assert known[0] == 0  # the cycle crawled
    assert decode_visit(encode_visit(visit)) == visit
    # fetched again in its cycle, answering no revisit entry: a repeat, nothing changes
    kind, again, visit = revisit_fetch(known, _event(url, 2_000), FIXED)
    assert (kind, again, visit) == (FetchKind.REPEAT, known, None)
    # answering the revisit entry due at 1,000 + 20 min: a revisit, the record moves on
    due = {REVISIT_ECHO: str(1_000 + MINUTES_20)}
    kind, after, visit = revisit_fetch(known, _event(url, 1_300_000, echo=due), FIXED)
    assert kind is FetchKind.REVISIT and visit is not None and after is not None
    assert after[0] == 0 and after[1] != known[1]
    # the same revisit answered twice: the second is a repeat
    kind, _, visit = revisit_fetch(after, _event(url, 1_300_500, echo=due), FIXED)
    assert (kind, visit) == (FetchKind.REPEAT, None)


def test_a_windows_visits_take_their_hosts_budget_in_order() -> None:
    """Fixed revisits: each page is due 20 min after its download; the URL's latest visit in
    the window decides, and the host's state is written for the next window."""
    a, b = "https://news.example/", "https://news.example/world"
    visits = [
        revisit_fetch(None, _event(a, 1_000), FIXED)[2],
        revisit_fetch(None, _event(b, 2_000), FIXED)[2],
    ]
    hosts: dict[str, bytes] = {}
    decisions = window_decisions(hosts, {}, [v for v in visits if v], FIXED, "bfs")
    assert list(decisions) == [a, b]
    entries = {u: CHANGE.decode(raw) for u, raw in decisions.items()}
    assert {u: e.not_before for u, e in entries.items()} == {
        a: 1_000 + MINUTES_20,
        b: 2_000 + MINUTES_20,
    }
    assert len(hosts) == 1  # the one host's state, for the next window


def _entry(url: str, due: int) -> bytes:
    visit = revisit_fetch(None, _event(url, due - MINUTES_20), FIXED)[2]
    assert visit is not None
    return window_decisions({}, {}, [visit], FIXED, "bfs")[url]


def test_a_decision_folds_into_its_windows_changes_and_an_empty_one_leaves_them() -> None:
    """A URL no strategy message reached: window 1's revisit entry stands after window 2,
    whose answer downloaded nothing (an empty decision), as the embedded engine's frontier
    keeps window 1's entry when window 2 writes nothing for the URL; a later window's entry
    replaces it."""
    strategy = build_strategy("bfs", budget=10)
    url = "https://news.example/"
    first, later = _entry(url, 5_000_000), _entry(url, 9_000_000)
    w1, w2, w3 = 1_000, 2_000, 3_000
    decided = [(w1, 4, REVISIT_INDEX, 0, 0, first), (w2, 9, REVISIT_INDEX, 0, 0, b"")]
    state, latest, applied = apply_with_revisits(strategy, url, b"state", decided)
    assert (state, applied) == (b"state", False)
    (only,) = latest.values()
    assert isinstance(only, FrontierEntry) and only.not_before == 5_000_000
    decided = [(w1, 4, REVISIT_INDEX, 0, 0, first), (w3, 2, REVISIT_INDEX, 0, 0, later)]
    _, latest, _ = apply_with_revisits(strategy, url, b"state", decided)
    assert [c.not_before for c in latest.values()] == [9_000_000]  # type: ignore[union-attr]
