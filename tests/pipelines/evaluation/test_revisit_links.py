"""Which links a revisit brings: kinds of links and their odds, worked out by hand."""

from __future__ import annotations

import pytest

from frontierflow.pipelines.evaluation.revisit_links import LinkOdds, link_folder, link_kind


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://www.bbc.com/news/world-europe-65432101", "www.bbc.com/news/world-europe-"),
        ("https://www.bbc.com/news/world-europe-65439999", "www.bbc.com/news/world-europe-"),
        ("https://www.bbc.com/sport/football/65432101", "www.bbc.com/sport/football/"),
        ("https://www.bbc.com/future/article/20230101-a-title", "www.bbc.com/future/article/"),
        ("https://www.bbc.com/sections/europe", "www.bbc.com/sections/europe"),
        ("https://www.bbc.com/", "www.bbc.com/"),
    ],
)
def test_a_links_kind_drops_the_story_number_and_what_follows(url: str, kind: str) -> None:
    assert link_kind(url) == kind


def test_a_kind_is_worth_a_download_while_laplaces_rule_keeps_it_above_the_bar() -> None:
    odds = LinkOdds(skip_below=0.1)
    football = "https://www.bbc.com/sport/football/1"
    europe = "https://www.bbc.com/news/world-europe-1"
    assert odds.hit_rate(football) == pytest.approx(1 / 2)  # never judged: (0 + 1) / (0 + 2)
    for k in range(8):
        odds.judged(f"https://www.bbc.com/sport/football/{k}", rewarded=False)
    assert odds.hit_rate(football) == pytest.approx(1 / 10)  # (0 + 1) / (8 + 2): at the bar
    assert odds.worth(football)
    odds.judged("https://www.bbc.com/sport/football/9", rewarded=False)
    assert odds.hit_rate(football) == pytest.approx(1 / 11)
    assert not odds.worth(football)
    odds.judged(europe, rewarded=True)
    assert odds.hit_rate(europe) == pytest.approx(2 / 3)  # (1 + 1) / (1 + 2)
    assert odds.worth(europe)


def test_without_a_bar_every_link_is_worth_a_download() -> None:
    odds = LinkOdds(skip_below=0.0)
    for k in range(50):
        odds.judged(f"https://www.bbc.com/sport/football/{k}", rewarded=False)
    assert odds.worth("https://www.bbc.com/sport/football/99")


@pytest.mark.parametrize("bad", [-0.1, 1.0])
def test_a_bar_outside_zero_to_one_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="skip_below"):
        LinkOdds(bad)


@pytest.mark.parametrize(
    ("url", "folder"),
    [
        ("https://www.bbc.com/sections/europe", "www.bbc.com/sections"),
        ("https://www.bbc.com/sections/football", "www.bbc.com/sections"),
        ("https://www.bbc.com/news/world-europe-65432101", "www.bbc.com/news"),
        ("https://www.bbc.com/", "www.bbc.com"),
    ],
)
def test_a_links_folder_is_its_host_and_path_without_the_last_segment(
    url: str, folder: str
) -> None:
    assert link_folder(url) == folder


def test_the_rewarded_share_of_a_kind_has_no_prior() -> None:
    """Never downloaded: 0 (no evidence), where Laplace's rule says 1/2. Four downloaded,
    three rewarded: 3/4."""
    odds = LinkOdds(skip_below=0.1)
    europe = "https://www.bbc.com/news/world-europe-1"
    assert odds.rewarded_share(europe) == 0.0
    for rewarded in (True, True, False, True):
        odds.judged(europe, rewarded)
    assert odds.rewarded_share("https://www.bbc.com/news/world-europe-2") == pytest.approx(0.75)
