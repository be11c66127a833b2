"""The bounded replay's exact crawl clock (`beam.exact_clock`): prefix sums over buckets of
positions, worked out by hand, and a clock over many buckets equal to the embedded engine's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.beam import exact_clock
from frontierflow.schemas.records import FetchEvent


def test_clock_over_many_buckets_equals_embedded(
    beam_replay_case: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Buckets of 7 positions: 301 records make 43 buckets, so every event's clock is the
    prefix sum of earlier buckets plus its rank in its own (IECA's clock steps every 3
    pages, so one page off anywhere shows in the distances)."""
    monkeypatch.setattr(exact_clock, "CLOCK_BUCKET", 7)
    beam_replay_case.check_equal(tmp_path, "ieca", ["--runner=FnApiRunner"])


def test_pages_before_buckets_by_hand() -> None:
    counts = {("a", 0): 3, ("a", 2): 4, ("b", 1): 5, ("a", 5): 1}
    assert exact_clock.pages_before_buckets(counts) == {
        ("a", 0): 0,
        ("a", 2): 3,
        ("a", 5): 7,
        ("b", 1): 0,
    }


def test_a_fetch_crosses_the_shuffles_whole() -> None:
    """Every field of an event comes back from its shuffle encoding as it went in: maps,
    floats to the bit, None, text, and the outlinks as a tuple."""
    event = FetchEvent(
        url="https://a.example/p",
        fetched_at=1_700_000_000_123,
        status=200,
        fetcher_id="f1",
        host="a.example",
        via="https://a.example/",
        crawl_id="c",
        cycle=2,
        outlinks=("https://a.example/x", "https://b.example/y"),
        terms={"sock": 0.1 + 0.2},
        text="page text",
        content_hash="abc",
        published_at=None,
        bytes=12_345,
        fetch_ms=12.5,
        echo={"ieca.d": "1.25"},
        retry_after_ms=None,
        failure=None,
        will_retry=False,
        depth=3,
    )
    back = exact_clock.decode_fetch(exact_clock.encode_fetch(event))
    assert back == event
    assert type(back.outlinks) is tuple
    assert back.terms == {"sock": 0.30000000000000004}
