"""IECA+ as a streaming operator: every in-link adds its cash to a page's distance.

Routing is IECA's: the parent's distance comes back in the echo of the frontier entry that
led to the fetch (`ieca+.d`), and each Link carries it with log10 O(i), so only the
child's own state is touched and the rule runs unchanged per key in the embedded engine,
the simulator and both Beam forms — no pass over all states, no recomputation. A page with
no distance in its echo (a seed, or a page a fetcher found by itself) is a starting page.
The rule and its departures from Golshani & ZarehBidoki 2012 are in `state/ieca_plus.py`.
"""

from __future__ import annotations

from frontierflow.pipelines.core.strategy import CrawlClock, Fetched, Link, Message, Seed, Strategy
from frontierflow.pipelines.strategies.base import EntryFactory, echo_float, fmt_float
from frontierflow.schemas.records import FetchEvent, FrontierChange, Removal
from frontierflow.state.ieca import UNKNOWN, link_weight
from frontierflow.state.ieca_plus import (
    IecaPlusDistance,
    IecaPlusParams,
    decode_ieca_plus,
    encode_ieca_plus,
    link_damping,
)

ECHO_DISTANCE = "ieca+.d"
_UNSEEN = IecaPlusDistance()


class IecaPlusStrategy(Strategy[IecaPlusDistance]):
    """Log-cash distances; priority = −distance; every change re-emits the URL's entry."""

    name = "ieca-plus"
    changes_own_key = True
    family = "ieca-plus"

    def __init__(self, params: IecaPlusParams) -> None:
        self.params = params
        self._entries = EntryFactory(self.name)
        self._damping_at = -1
        self._damping = link_damping(0, params)

    def damping(self, crawled: int) -> float:
        """δ of a link's candidate at `crawled` pages; remembered, as every link asks."""
        if crawled != self._damping_at:
            self._damping = link_damping(crawled, self.params)
            self._damping_at = crawled
        return self._damping

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        d_parent = echo_float(event.echo, ECHO_DISTANCE, self.params.ieca.seed_distance)
        return d_parent, link_weight(outdegree)

    def apply(
        self, key: str, state: IecaPlusDistance | None, message: Message, clock: CrawlClock
    ) -> tuple[IecaPlusDistance | None, FrontierChange | None]:
        current = state if state is not None else _UNSEEN
        if isinstance(message, Link):
            new = current.after_link(
                message.value, message.weight, message.cycle, self.damping(clock.crawled)
            )
            if new is current:
                return current, None
            echo = {ECHO_DISTANCE: repr(new.distance)}
            entry = self._entries.entry_owning_echo(
                key,
                -new.distance,
                message.crawl_id,
                message.cycle,
                message.parent,
                clock.now_ms,
                echo,
            )
            return new, entry
        if isinstance(message, Fetched):
            distance = current.distance
            if distance == UNKNOWN:
                distance = self.params.ieca.seed_distance
            cycle = max(current.crawled_cycle, message.cycle)
            return IecaPlusDistance(distance, current.inlinks, cycle), Removal(key)
        if isinstance(message, Seed):
            if current.crawled_in(message.cycle):
                return current, None
            seeded = current._replace(distance=self.params.ieca.seed_distance)
            echo = {ECHO_DISTANCE: fmt_float(seeded.distance)}
            entry = self._entries.entry(
                key, -seeded.distance, message.crawl_id, message.cycle, None, clock, echo
            )
            return seeded, entry
        return state, None  # IECA+ routes no Reinforce messages

    def encode_state(self, state: IecaPlusDistance) -> bytes:
        return encode_ieca_plus(state)

    def decode_state(self, data: bytes) -> IecaPlusDistance:
        return decode_ieca_plus(data)


__all__ = ["ECHO_DISTANCE", "IecaPlusStrategy"]
