"""ScalingDecisions applied to a running Scrapy crawler.

Scrapy reads `CONCURRENT_REQUESTS` once, into the downloader's `total_concurrency`
attribute, and checks that attribute every time the engine asks whether it must back out
(`Downloader.needs_backout`: `0 < total_concurrency <= len(active)`), so setting it on the
running downloader changes how many requests are in flight from the next scheduling round
on; requests already in flight finish. `CONCURRENT_REQUESTS_PER_DOMAIN` lives in each
downloader slot (`Slot.concurrency`) and is left to the user: the scheduler hands Scrapy one
request per host at a time anyway (the reference fetcher's rule), so the decision's thread
count is the number of hosts fetched from at once, as the reference fetcher's workers are.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def apply_threads(downloader: Any, threads: int) -> int | None:
    """Set the downloader's total concurrency to `threads` (already clamped); the previous
    value when it changed, else None."""
    before = int(downloader.total_concurrency)
    if before == threads:
        return None
    downloader.total_concurrency = threads
    log.info("ScalingDecision: Scrapy's concurrency %d -> %d", before, threads)
    return before
