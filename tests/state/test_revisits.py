"""A page's revisit record, Cho & Garcia-Molina's change-rate estimator (2003, TOIT) and the
shares of a revisit budget (their optimal-freshness allocation, 2003, TODS; proportional;
our square-root rule), with values worked by hand from the equations."""

from __future__ import annotations

import math

import pytest

from frontierflow.state.revisit_budget import (
    due_ms,
    freshness,
    marginal_freshness,
    optimal_freshness_frequencies,
    proportional_frequencies,
    square_root_frequencies,
)
from frontierflow.state.revisits import (
    HOUR_MS,
    PageRevisits,
    RevisitSettings,
    change_rate,
    content_fingerprint,
    decode_page_revisits,
    discovery_rate,
    encode_page_revisits,
    first_visit,
    link_fetched,
    link_hashes,
    links_new_to,
    new_link_rate,
    outlink_fingerprint,
    probe_due_ms,
    probe_value,
    probe_wait_ms,
    record_visit,
    seen_link_fetched,
)
from frontierflow.state.storage.codec import StateCodecError

PLAIN = RevisitSettings()


def visited(
    changes: list[bool], interval_ms: int | list[int], settings: RevisitSettings = PLAIN
) -> PageRevisits:
    """A page first downloaded at 0 (version 0), then revisited after each interval; a
    revisit that changed sees a new version."""
    intervals = interval_ms if isinstance(interval_ms, list) else [interval_ms] * len(changes)
    page, t, version = first_visit(0, 0), 0, 0
    for changed, interval in zip(changes, intervals, strict=True):
        t += interval
        version += changed
        page = record_visit(page, t, version, 0, settings)
    return page


# --- the estimator ------------------------------------------------------------------------


def test_ten_regular_visits_three_changes() -> None:
    """n = 10, X = 3, I = 2 h: r̂ = −log((10 − 3 + 0.5)/(10 + 0.5)) = log(10.5/7.5) =
    log 1.4 = 0.336472; λ̂ = r̂ / I = 0.168236 per hour."""
    page = visited([True, False, False, True, False, False, False, True, False, False], 2 * HOUR_MS)
    assert (page.visits, page.changes, page.observed_ms) == (10.0, 3.0, 20 * HOUR_MS)
    rate = change_rate(page, PLAIN)
    assert rate is not None
    assert rate * HOUR_MS == pytest.approx(0.168236, abs=1e-6)


def test_a_page_changed_at_every_visit_has_a_finite_rate() -> None:
    """X = n = 4, I = 1 h: r̂ = log(4.5 / 0.5) = log 9 = 2.197225 per hour (the naive X/n·f
    would say 1 per hour, the MLE −log((n − X)/n) would be infinite)."""
    rate = change_rate(visited([True] * 4, HOUR_MS), PLAIN)
    assert rate is not None and rate * HOUR_MS == pytest.approx(2.197225, abs=1e-6)


def test_a_page_never_seen_changing_has_rate_zero() -> None:
    assert change_rate(visited([False] * 5, HOUR_MS), PLAIN) == 0.0


def test_irregular_visits_use_their_mean_interval() -> None:
    """Revisits after 1 h and 2 h, one change: n = 2, X = 1, I = T/n = 1.5 h;
    r̂ = log(2.5 / 1.5) = 0.510826, λ̂ = 0.510826 / 1.5 = 0.340550 per hour."""
    rate = change_rate(visited([True, False], [HOUR_MS, 2 * HOUR_MS]), PLAIN)
    assert rate is not None and rate * HOUR_MS == pytest.approx(0.340550, abs=1e-6)


def test_no_estimate_before_enough_revisits() -> None:
    settings = RevisitSettings(min_revisits=3)
    assert change_rate(visited([True, True], HOUR_MS), settings) is None
    assert discovery_rate(visited([True, True], HOUR_MS), settings) is None
    assert change_rate(visited([True, True, True], HOUR_MS), settings) is not None


def test_half_life_weighs_old_visits_down() -> None:
    """Half-life 1 h, revisits every hour: changed, unchanged, changed.
    After the 1st: n = 1, X = 1, T = 1 h. 2nd (weight 0.5): n = 1.5, X = 0.5, T = 1.5 h.
    3rd: n = 1.75, X = 1.25, T = 1.75 h. r̂ = log(2.25 / 1.0) = 0.810930, I = 1 h."""
    settings = RevisitSettings(half_life_ms=HOUR_MS)
    page = visited([True, False, True], HOUR_MS, settings)
    assert (page.visits, page.changes) == pytest.approx((1.75, 1.25))
    assert page.observed_ms == pytest.approx(1.75 * HOUR_MS)
    rate = change_rate(page, settings)
    assert rate is not None and rate * HOUR_MS == pytest.approx(0.810930, abs=1e-6)


def test_last_change_and_time_since_it() -> None:
    page = visited([False, True, False, False], HOUR_MS)
    assert page.last_change_ms == 2 * HOUR_MS and page.last_visit_ms == 4 * HOUR_MS
    assert page.since_change_ms(5 * HOUR_MS) == 3 * HOUR_MS


def test_a_revisit_before_the_last_visit_is_refused() -> None:
    with pytest.raises(ValueError, match="before the last visit"):
        record_visit(first_visit(10, 0), 9, 0, 0, PLAIN)


def test_probes_double_while_a_page_stays_unchanged() -> None:
    """probe_ms 1 h: first download at 0 → due at 1 h; unchanged at 1 h → unchanged for 1 h
    → due at 2 h; unchanged at 2 h → due at 4 h; changed at 4 h → due at 5 h."""
    settings = RevisitSettings(probe_ms=HOUR_MS, probe_max_ms=10 * HOUR_MS)
    page = first_visit(0, 7)
    assert probe_due_ms(page, settings) == HOUR_MS
    page = record_visit(page, HOUR_MS, 7, 0, settings)
    assert probe_due_ms(page, settings) == 2 * HOUR_MS
    page = record_visit(page, 2 * HOUR_MS, 7, 0, settings)
    assert probe_wait_ms(page, settings) == 2 * HOUR_MS
    assert probe_due_ms(page, settings) == 4 * HOUR_MS
    page = record_visit(page, 4 * HOUR_MS, 8, 0, settings)
    assert probe_due_ms(page, settings) == 5 * HOUR_MS
    late = record_visit(first_visit(0, 1), 30 * HOUR_MS, 1, 0, settings)
    assert probe_due_ms(late, settings) == 40 * HOUR_MS  # capped at probe_max_ms


def test_probe_value_is_the_mean_of_new_links_per_revisit_with_one_more() -> None:
    """Never revisited: (0 + 1)/(0 + 1) = 1. Revisits that found 6 and 0 new links:
    (6 + 1)/(2 + 1) = 7/3. Three that found none: 1/4. The links of a first download wait
    but are not revisits' finds."""
    first = first_visit(0, 0, new_links=12)
    assert first.waiting == 12 and probe_value(first) == 1.0
    page = record_visit(record_visit(first, HOUR_MS, 1, 6, PLAIN), 2 * HOUR_MS, 1, 0, PLAIN)
    assert probe_value(page) == pytest.approx(7 / 3)
    assert probe_value(visited([False] * 3, HOUR_MS)) == pytest.approx(1 / 4)


def test_discovery_rate_counts_rewarded_stories_per_time_watched() -> None:
    """Two revisits 2 h apart first saw 3 and 2 new links. The 3 of the first were fetched
    through the page, 2 of them rewarded; 1 of the second's was fetched through another
    page. 2 stories in 4 h watched = 0.5 per hour; at a hit rate of 0.25 the one link still
    waiting adds 0.25 · 1 · 2 visits / 4 h = 0.125 per hour."""
    page = record_visit(first_visit(0, 0), 2 * HOUR_MS, 1, 3, PLAIN)
    assert page.waiting == 3
    for rewarded in (True, True, False):
        page = seen_link_fetched(link_fetched(page, rewarded))
    page = seen_link_fetched(record_visit(page, 4 * HOUR_MS, 2, 2, PLAIN))
    assert (page.found, page.relevant, page.waiting) == (5.0, 2.0, 1)
    rate = discovery_rate(page, PLAIN)
    assert rate is not None and rate * HOUR_MS == pytest.approx(0.5)
    rate = discovery_rate(page, PLAIN, hit_rate=0.25)
    assert rate is not None and rate * HOUR_MS == pytest.approx(0.625)
    assert seen_link_fetched(first_visit(0, 0)).waiting == 0  # never below 0


def test_fingerprints() -> None:
    assert outlink_fingerprint(["b", "a", "a"]) == outlink_fingerprint(["a", "b"])
    assert outlink_fingerprint(["a", "b"]) != outlink_fingerprint(["a", "c"])
    assert content_fingerprint(b"x") != content_fingerprint(b"y")
    assert 0 <= outlink_fingerprint(["a"]) < 2**64


def test_encoding_round_trip_and_errors() -> None:
    page = PageRevisits(5, 3, 2**64 - 1, 1.75, 1.25, 6.3e6, 4.0, 2.0, 3, 7)
    data = encode_page_revisits(page)
    assert len(data) == 73
    assert decode_page_revisits(data) == page
    with pytest.raises(StateCodecError, match="73 bytes"):
        decode_page_revisits(data[:-1])
    with pytest.raises(StateCodecError, match="version 2"):
        decode_page_revisits(b"\x02" + data[1:])
    with pytest.raises(StateCodecError):
        encode_page_revisits(PageRevisits(0, 0, -1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"half_life_ms": 0},
        {"min_revisits": 0},
        {"probe_ms": 0},
        {"probe_ms": 10, "probe_max_ms": 5},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        RevisitSettings(**kwargs)


# --- the budget ---------------------------------------------------------------------------


def test_proportional_shares() -> None:
    assert proportional_frequencies({"a": 1.0, "b": 3.0}, 2.0) == {"a": 0.5, "b": 1.5}
    assert proportional_frequencies({"a": 0.0}, 2.0) == {"a": 0.0}


def test_square_root_shares() -> None:
    """√1 : √4 = 1 : 2 of a budget of 3."""
    assert square_root_frequencies({"a": 1.0, "b": 4.0}, 3.0) == {"a": 1.0, "b": 2.0}


def test_freshness_of_a_regularly_revisited_page() -> None:
    """F̄(λ, f) = (f/λ)(1 − e^(−λ/f)): F̄(1, 1) = 1 − e⁻¹ = 0.632121; F̄(2, 1) = (1 − e⁻²)/2 =
    0.432332; ∂F̄/∂f at (1, 1) = 1 − 2e⁻¹ = 0.264241."""
    assert freshness(1.0, 1.0) == pytest.approx(0.632121, abs=1e-6)
    assert freshness(2.0, 1.0) == pytest.approx(0.432332, abs=1e-6)
    assert (freshness(0.0, 1.0), freshness(1.0, 0.0)) == (1.0, 0.0)
    assert marginal_freshness(1.0, 1.0) == pytest.approx(0.264241, abs=1e-6)
    assert marginal_freshness(4.0, 0.0) == 0.25


# μ = 1 − 2/e makes r = 1 the optimum of a page with λ = 1 (f = 1); a page with
# λ = (1 − 3e⁻²)/μ = 0.593994/0.264241 = 2.247925 then has r = 2 (f = 1.123962); a page with
# λ = 4 has μ·λ = 1.057 ≥ 1: no revisit can add μ to its freshness, so it gets none.
MU = 1 - 2 / math.e
LAMBDA_B = (1 - 3 * math.exp(-2)) / MU


def test_optimal_freshness_worked_by_hand() -> None:
    rates = {"a": 1.0, "b": LAMBDA_B, "c": 4.0}
    assert abs(LAMBDA_B - 2.247925) < 1e-6
    f = optimal_freshness_frequencies(rates, 2.123962)
    assert f["a"] == pytest.approx(1.0, abs=1e-5)
    assert f["b"] == pytest.approx(1.123962, abs=1e-5)
    assert f["c"] == 0.0
    # the Lagrange condition: equal marginal freshness μ on every revisited page
    assert marginal_freshness(1.0, f["a"]) == pytest.approx(MU, abs=1e-6)
    assert marginal_freshness(LAMBDA_B, f["b"]) == pytest.approx(MU, abs=1e-6)


def test_optimal_freshness_is_not_proportional() -> None:
    """A page changing 4× as often gets fewer revisits than in proportion (here fewer than
    the slow page: 1 − (1 + r)e^(−r) = μλ needs r_fast = λ_fast/f_fast > r_slow), and the
    copies are fresher than under the proportional shares."""
    rates = {"slow": 1.0, "fast": 4.0}
    optimal = optimal_freshness_frequencies(rates, 2.0)
    proportional = proportional_frequencies(rates, 2.0)
    assert sum(optimal.values()) == pytest.approx(2.0)
    assert optimal["fast"] < proportional["fast"] == 1.6
    assert optimal["fast"] < optimal["slow"]

    def total(freqs: dict[str, float]) -> float:
        return sum(freshness(rates[k], freqs[k]) for k in rates)

    assert total(optimal) > total(proportional)


def test_equal_rates_share_equally_and_nothing_changing_gets_nothing() -> None:
    f = optimal_freshness_frequencies({"a": 3.0, "b": 3.0}, 4.0)
    assert f["a"] == pytest.approx(2.0) and f["b"] == pytest.approx(2.0)
    assert optimal_freshness_frequencies({"a": 0.0}, 4.0) == {"a": 0.0}
    assert optimal_freshness_frequencies({"a": 1.0}, 0.0) == {"a": 0.0}


@pytest.mark.parametrize(
    ("rates", "budget"),
    [({"a": -1.0}, 1.0), ({"a": math.nan}, 1.0), ({"a": 1.0}, -1.0), ({"a": 1.0}, math.inf)],
)
def test_bad_rates_or_budgets_are_refused(rates: dict[str, float], budget: float) -> None:
    for rule in (proportional_frequencies, square_root_frequencies, optimal_freshness_frequencies):
        with pytest.raises(ValueError):
            rule(rates, budget)


def test_due_time() -> None:
    assert due_ms(1000, 1 / 500) == 1500
    assert due_ms(1000, 0.0) is None


def test_links_new_to_a_page_are_counted_against_its_last_version() -> None:
    before = link_hashes(["a", "b", "b"])
    assert len(before) == 2 and list(before) == sorted(before)
    assert links_new_to(before, link_hashes(["b", "c", "d"])) == 2
    assert links_new_to((), before) == 2  # a first download: every link is new to it


def test_the_rate_of_new_links_is_what_revisits_found_over_the_time_watched() -> None:
    settings = RevisitSettings(min_revisits=2)
    page = first_visit(0, 1, 5)  # the first download's links are no revisit's finding
    page = record_visit(page, 1_000, 2, 3, settings)
    assert new_link_rate(page, settings) is None  # one revisit, two wanted
    page = record_visit(page, 3_000, 2, 0, settings)
    assert new_link_rate(page, settings) == pytest.approx(3 / 3_000, rel=1e-12)
