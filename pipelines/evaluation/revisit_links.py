"""Which links a revisit brings are worth a download: the judge's verdicts so far on links
of the same kind (`link_kind`: the URL's folder and the words that lead its last segment,
so that news/world-europe-65432101 and news/world-europe-65439999 are one kind, and
sport/football/65432101 another). Links of a kind seldom rewarded wait for a download slot
no revisit is due for, so when downloads are scarce they go to revisits instead.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_LEAD = re.compile(r"[A-Za-z_-]*")


def link_folder(url: str) -> str:
    """The host and the folder of the path (www.bbc.com/sections for every section page)."""
    parts = urlsplit(url)
    return f"{parts.netloc}{parts.path.rpartition('/')[0]}"


def link_kind(url: str) -> str:
    """The host, the folder of the path and the letters and hyphens its last segment
    starts with (a story's number or date and what follows are dropped)."""
    parts = urlsplit(url)
    folder, _, last = parts.path.rpartition("/")
    lead = _LEAD.match(last)
    return f"{parts.netloc}{folder}/{lead.group(0) if lead else ''}"


class LinkOdds:
    """Per kind of link, downloads judged and rewarded; `worth` says whether a link of
    that kind should be downloaded (Laplace's rule: (rewarded + 1) / (judged + 2) at
    least `skip_below`)."""

    def __init__(self, skip_below: float) -> None:
        if not 0.0 <= skip_below < 1.0:
            raise ValueError(f"skip_below must be in [0, 1), got {skip_below}")
        self.skip_below = skip_below
        self._judged: dict[str, int] = {}
        self._rewarded: dict[str, int] = {}

    def judged(self, url: str, rewarded: bool) -> None:
        kind = link_kind(url)
        self._judged[kind] = self._judged.get(kind, 0) + 1
        self._rewarded[kind] = self._rewarded.get(kind, 0) + rewarded

    def hit_rate(self, url: str) -> float:
        kind = link_kind(url)
        return (self._rewarded.get(kind, 0) + 1) / (self._judged.get(kind, 0) + 2)

    def rewarded_share(self, url: str) -> float:
        """The share of the links of this kind downloaded that were rewarded (0 for a kind
        never downloaded): the evidence that links of this kind are on the topic."""
        kind = link_kind(url)
        judged = self._judged.get(kind, 0)
        return self._rewarded.get(kind, 0) / judged if judged else 0.0

    def worth(self, url: str) -> bool:
        return self.skip_below <= 0.0 or self.hit_rate(url) >= self.skip_below
