"""The frontier topic read to its end: the latest entry per record key, and what a removal
takes away.

The topic is compacted per `records.change_key`: a URL, or (URL, parent) for a reply
request. Read to its end it holds one entry per key, the latest. A tombstone removes its own
key and nothing else: a URL's tombstone leaves the reply requests for that URL (each parent
waiting must get its answer), an answered reply request's tombstone leaves the URL's entry
and the other parents' requests. A reader that counts a URL as gone once it is fetched or
removed (the operator's page, which answers no request) drops the URL with every request for
it instead; an index from a URL to its reply-request keys makes that one dictionary look-up.

`FrontierView` keeps no order. Each reader keeps its own heap beside it (its priorities, its
ties, its bounds), pushes an item per entry, and skips the items a later entry replaced or a
removal took away with `is_current` (or `take`, which serves the item too).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, ValuesView
from typing import Generic, TypeVar

Key = str | tuple[str, str]
"""A record key, as `records.change_key` gives it: a URL, or (URL, parent)."""

V = TypeVar("V")


class FrontierView(Generic[V]):
    """The latest value per record key (see the module docstring); values are never None.

    `latest` and `replies` stay the same two dicts for the view's life, so a reader may hold
    them for fast reads in a loop; every change goes through the view's methods.
    """

    __slots__ = ("latest", "replies")

    def __init__(self) -> None:
        self.latest: dict[Key, V] = {}
        """Record key → its latest value, in the order the keys first came."""
        self.replies: dict[str, set[tuple[str, str]]] = {}
        """URL → the keys of the reply requests for it that the view holds (none: absent)."""

    def __len__(self) -> int:
        return len(self.latest)

    def __contains__(self, key: object) -> bool:
        return key in self.latest

    def __iter__(self) -> Iterator[Key]:
        return iter(self.latest)

    def get(self, key: Key) -> V | None:
        return self.latest.get(key)

    def values(self) -> ValuesView[V]:
        return self.latest.values()

    def items(self) -> ItemsView[Key, V]:
        return self.latest.items()

    def put(self, key: Key, value: V) -> None:
        """The latest entry for `key`: it replaces the one before (keeping the key's place)."""
        if type(key) is tuple:
            keys = self.replies.get(key[0])
            if keys is None:
                self.replies[key[0]] = {key}
            else:
                keys.add(key)
        self.latest[key] = value

    def tombstone(self, key: Key) -> V | None:
        """A tombstone of `key`'s record: that entry leaves, and only it (a URL's tombstone
        spares the reply requests for the URL); the value it had, None if there was none."""
        value = self.latest.pop(key, None)
        if value is not None and type(key) is tuple:
            self._unindex(key)
        return value

    def drop_url(self, url: str) -> list[V]:
        """`url`'s entry and every reply request for it leave (the page is fetched or
        removed, for a reader that answers no request itself); the values they had."""
        latest = self.latest
        dropped = []
        value = latest.pop(url, None)
        if value is not None:
            dropped.append(value)
        for key in self.replies.pop(url, ()):
            dropped.append(latest.pop(key))
        return dropped

    def is_current(self, key: Key, value: V) -> bool:
        """Whether `value` is still `key`'s latest: a lazy heap's item is stale once a later
        entry replaced it or a removal took its key away."""
        return self.latest.get(key) is value

    def take(self, key: Key, value: V) -> bool:
        """Serve a lazy heap's item: if `value` is `key`'s latest, the key leaves and True;
        a stale item changes nothing and gives False."""
        latest = self.latest
        if latest.get(key) is not value:
            return False
        del latest[key]
        if type(key) is tuple:
            self._unindex(key)
        return True

    def clear(self) -> None:
        self.latest.clear()
        self.replies.clear()

    def _unindex(self, key: tuple[str, str]) -> None:
        keys = self.replies[key[0]]
        keys.discard(key)
        if not keys:
            del self.replies[key[0]]
