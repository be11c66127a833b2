"""IECA+'s rules (state/ieca_plus.py) with values worked out by hand."""

from __future__ import annotations

import math

import pytest

from frontierflow.state.ieca import UNKNOWN, IecaParams, alpha, delta_t, updated_distance
from frontierflow.state.ieca_plus import (
    IecaPlusDistance,
    IecaPlusParams,
    decode_ieca_plus,
    encode_ieca_plus,
    evidence_distance,
    link_damping,
)
from frontierflow.state.storage.codec import StateCodecError

LOG2 = math.log10(2)
P = IecaPlusParams(IecaParams(budget=1000, k=25), damping_scale=1.0)  # δ = δ_t: eq. 13


def test_first_link_is_eq13() -> None:
    # unknown page: the candidate itself, (1 − 0.35)·0.3 + log10 2 = 0.195 + 0.30103
    assert evidence_distance(UNKNOWN, 0.49603) == 0.49603
    state = IecaPlusDistance().after_link(0.3, LOG2, 0, 0.35)
    assert state.distance == pytest.approx(0.195 + 0.3010300)
    assert state.inlinks == 1 and state.crawled_cycle == -1


@pytest.mark.parametrize(
    ("d_child", "candidate", "expected"),
    [
        (1.0, 1.0, 1.0 - 0.3010300),  # two equal parents: cash doubles, distance − log10 2
        (0.5, 1.5, 0.4586073),  # 10^−0.5 + 10^−1.5 = 0.3478505; −log10 of it
        (1.5, 0.5, 0.4586073),  # the order of the parents does not matter
        (0.0, 0.0, -0.3010300),  # cash 1 + 1 = 2: the distance goes below zero
        (0.2, 40.0, 0.2),  # a negligible parent: 10^−39.8 vanishes next to 10^−0.2
    ],
)
def test_evidence_distance_adds_cash(d_child: float, candidate: float, expected: float) -> None:
    assert evidence_distance(d_child, candidate) == pytest.approx(expected, abs=1e-7)


def test_every_parent_counts_and_none_is_forgotten() -> None:
    # A seed (0.3) links to B twice over two of its pages, each with O = 2, δ = 0.35:
    # candidate 0.49603 each time; cash 2·10^−0.49603 → distance 0.49603 − log10 2 = 0.195
    b = IecaPlusDistance().after_link(0.3, LOG2, 0, 0.35).after_link(0.3, LOG2, 0, 0.35)
    assert b.distance == pytest.approx(0.195)
    assert b.inlinks == 2


def test_a_late_good_parent_still_pulls_a_page_forward() -> None:
    """Where IECA freezes (RESULTS: α = e^(−1.8) by 45%), IECA+ still moves.

    A page at distance 2.0 gets a link at 45% of a 100,000-page crawl (δ_t = 0.224) from a
    parent at 0.3 with one outlink: candidate 0.776·0.3 + 0 = 0.2328.
    IECA (eq. 10, α = e^(−1.8) = 0.1653): learned = 0.8347·2 + 0.1653·0.2328 = 1.7079;
    0.776·1.7079 = 1.3253; f = 2/0.3, 0.224·log10 f = 0.1846 → 1.1408.
    IECA+: 0.2328 − log10(1 + 10^(0.2328 − 2)) = 0.2328 − 0.0073558 = 0.2254.
    """
    ieca = IecaParams.for_budget(100_000)
    delta, a = delta_t(45_000, ieca), alpha(45_000, ieca)
    assert delta == pytest.approx(0.224) and a == pytest.approx(math.exp(-1.8))
    assert updated_distance(2.0, 0.3, 0.0, delta, a) == pytest.approx(1.1408, abs=1e-4)
    late = IecaPlusDistance(2.0, 7).after_link(0.3, 0.0, 0, delta)
    assert late.distance == pytest.approx(0.2254, abs=1e-4)
    assert late.inlinks == 8


def test_crawled_page_keeps_its_state() -> None:
    crawled = IecaPlusDistance(0.4, 3, 0)
    assert crawled.after_link(0.1, 0.0, 0, 0.35) is crawled
    # in the next cycle it is waiting again and the link counts
    assert crawled.after_link(0.4, 0.0, 1, 0.0).distance == pytest.approx(0.4 - LOG2)


def test_link_damping_is_eq12_scaled() -> None:
    assert link_damping(0, P) == pytest.approx(0.35)
    assert link_damping(250, P) == pytest.approx(0.35 - 0.28 * 0.25)  # steps every k = 25
    half = IecaPlusParams(IecaParams(budget=1000, k=25), damping_scale=0.5)
    assert link_damping(0, half) == pytest.approx(0.175)
    assert link_damping(0, IecaPlusParams(damping_scale=0.0)) == 0.0  # one-pass OPIC


def test_params_refuse_nonsense_and_scale_with_budget() -> None:
    with pytest.raises(ValueError, match="damping scale must be finite"):
        IecaPlusParams(damping_scale=-0.1)
    with pytest.raises(ValueError, match="within"):
        IecaPlusParams(damping_scale=3.0)  # 3 · 0.35 > 1
    params = IecaPlusParams.for_budget(100_000, damping_scale=0.5)
    assert params.ieca.k == 2_500 and params.damping_scale == 0.5
    # the chosen default: a link's candidate is damped by 0.75·δ_t (0.2625 at the start)
    assert IecaPlusParams().damping_scale == 0.75
    assert link_damping(0, IecaPlusParams()) == pytest.approx(0.2625)


def test_encoding_is_16_little_endian_bytes() -> None:
    state = IecaPlusDistance(0.5, 3, -1)
    assert encode_ieca_plus(state) == (
        b"\x00\x00\x00\x00\x00\x00\xe0\x3f" + b"\x03\x00\x00\x00" + b"\xff\xff\xff\xff"
    )
    for s in (IecaPlusDistance(), state, IecaPlusDistance(-1.25, 70_000, 4)):
        assert decode_ieca_plus(encode_ieca_plus(s)) == s
    with pytest.raises(StateCodecError, match="needs 16 bytes"):
        decode_ieca_plus(b"\x00" * 12)  # an IECA state is not an IECA+ one
    with pytest.raises(StateCodecError, match="cannot encode"):
        encode_ieca_plus(IecaPlusDistance(0.5, 2**31, 0))
