"""IECA as a streaming operator: distances per URL, priority = −distance (Golshani &
ZarehBidoki 2012).

Routing reads the parent's distance from the echo of the frontier entry that led to the
fetch (`ieca.d`), so a Link message to each child carries d_i and log10 O(i) and only the
child's own state is touched. An event with no echo at all (a WARC, another crawler's log)
gets the distance the page's own state holds at fetch time (`echo_from_state`: what its
latest entry carried); a page with no distance still (a seed, or a page a fetcher found by
itself) counts as a starting page at the seed distance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from frontierflow.pipelines.core.strategy import (
    Changes,
    CrawlClock,
    EchoFill,
    Fetched,
    Inlink,
    Link,
    Message,
    Queued,
    Seed,
    Strategy,
)
from frontierflow.pipelines.strategies.base import EntryFactory, echo_float, fmt_float
from frontierflow.schemas.records import FetchEvent, FrontierChange, FrontierEntry, Removal
from frontierflow.state.ieca import (
    NOT_CRAWLED,
    UNKNOWN,
    IecaDistance,
    IecaParams,
    clock_coefficients,
    decode_ieca,
    encode_ieca,
    encode_ieca_many,
    link_weight,
)
from frontierflow.state.urls import host_of

ECHO_DISTANCE = "ieca.d"
_UNSEEN = IecaDistance()


class IecaStrategy(Strategy[IecaDistance]):
    """Logarithmic-distance ordering; every change re-emits the URL's entry."""

    name = "ieca"
    changes_own_key = True
    family = "ieca"
    echo_fill = EchoFill.PAGE
    immutable_states = True

    def __init__(self, params: IecaParams) -> None:
        self.params = params
        self._entries = EntryFactory(self.name)
        self._coefficients_at = -1
        self._coefficients = clock_coefficients(0, params)
        self._coefficients_step = 0

    def coefficients(self, crawled: int) -> tuple[float, float]:
        """(δ_t, α) at `crawled` pages; remembered per step of k pages, as both are functions
        of crawled div k (eqs. 12 and 5) and every link asks (a Beam fold of one URL asks at
        the clocks of many events)."""
        if crawled != self._coefficients_at:
            step = crawled // self.params.k
            if step != self._coefficients_step:
                self._coefficients = clock_coefficients(crawled, self.params)
                self._coefficients_step = step
            self._coefficients_at = crawled
        return self._coefficients

    def echo_from_state(self, event: FetchEvent, state: IecaDistance) -> dict[str, str]:
        """The page's distance, as every entry for it carries (each change re-emits one)."""
        if state.distance == UNKNOWN:
            return {}
        return {ECHO_DISTANCE: fmt_float(state.distance)}

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        d_parent = echo_float(event.echo, ECHO_DISTANCE, self.params.seed_distance)
        return d_parent, link_weight(outdegree)

    def apply(
        self, key: str, state: IecaDistance | None, message: Message, clock: CrawlClock
    ) -> tuple[IecaDistance | None, Changes | None]:
        """One message: the batch fold of one (the rules are written once, in `apply_keys`)."""
        states = {key: state}
        changes = self.apply_keys({key: ((clock, message),)}, states)
        return states[key], changes[0] if changes else None

    def apply_batch(
        self,
        key: str,
        state: IecaDistance | None,
        messages: Iterable[tuple[CrawlClock, Message]],
    ) -> tuple[IecaDistance | None, list[Changes]]:
        """`apply_keys` for one key."""
        states = {key: state}
        changes = self.apply_keys({key: tuple(messages)}, states)
        return states[key], changes

    def apply_keys(
        self,
        batches: Mapping[str, Sequence[Queued]],
        states: dict[str, IecaDistance | None],
    ) -> list[Changes]:
        """Each key's messages folded into its state, with one entry built per key, for its
        last change: every change of an IECA key replaces the one before it (`change_key`
        is the URL), and after a Link's change the state moves again only with a change of
        its own, so the last Link's entry is the one its state has at the end.

        The step's keys go through one loop (δ_t and α are looked up again only when the
        crawl clock moves): the per-key work is the equations (`IecaDistance.after_link`)
        and, for a key that changed, its FrontierEntry. Entries of equal distance share one
        echo map (entries are never changed once built). An `Inlink` is read as the Link
        to its key (both carry the fields the fold reads, under the same names).
        """
        out: list[Changes] = []
        append = out.append
        after_link = IecaDistance.after_link
        coefficients = self.coefficients
        new_entry, name = FrontierEntry, self._entries.strategy
        at, (delta, a) = self._coefficients_at, self._coefficients
        known: dict[int, tuple[float, float]] = {}  # crawl clock → (δ_t, α), this call
        echoes: dict[float, dict[str, str]] = {}  # distance → its echo, shared by entries
        for key, messages in batches.items():
            state = states[key]
            current = state if state is not None else _UNSEEN
            held = state is not None  # False while the fold's state is still None
            last: FrontierChange | None = None
            link: Link | Inlink | None = None  # while the last change is a Link's: that Link
            link_ms = 0
            for clock, message in messages:
                if type(message) is Inlink or type(message) is Link:
                    held = True
                    if clock.crawled != at:  # a new event's clock
                        at = clock.crawled
                        pair = known.get(at)
                        if pair is None:
                            pair = known[at] = coefficients(at)
                        delta, a = pair
                    new = after_link(
                        current, message.value, message.weight, message.cycle, delta, a
                    )
                    if new is not current:
                        current, link, link_ms = new, message, clock.now_ms
                    continue
                after, change = self._apply_other(
                    key, current, current if held else None, message, clock
                )
                if after is not None:
                    current, held = after, True
                if change is not None:
                    last, link = change, None
            if link is not None:  # `EntryFactory.entry_owning_echo`, without its frame
                distance = current.distance
                echo = echoes.get(distance)
                # half of a step's distances repeat (a page's new links); 0.0 and -0.0 are
                # one key but two texts, so a zero is never shared
                if echo is None or not distance:
                    echo = echoes[distance] = {ECHO_DISTANCE: repr(distance)}
                last = new_entry(
                    key,
                    host_of(key),
                    -distance,
                    name,
                    link.crawl_id,
                    link.cycle,
                    link.parent,
                    link_ms,
                    echo,
                )
            states[key] = current if held else None
            if last is not None:
                append(last)
        return out

    def _apply_other(
        self,
        key: str,
        current: IecaDistance,
        state: IecaDistance | None,
        message: Message | Inlink,
        clock: CrawlClock,
    ) -> tuple[IecaDistance | None, FrontierChange | None]:
        if isinstance(message, Fetched):
            distance = current.distance
            if distance == UNKNOWN:
                distance = self.params.seed_distance
            return IecaDistance(distance, max(current.crawled_cycle, message.cycle)), Removal(key)
        if isinstance(message, Seed):
            return self._seed(key, current, message, clock)
        return state, None  # IECA routes no Reinforce messages

    def _seed(
        self, key: str, current: IecaDistance, message: Seed, clock: CrawlClock
    ) -> tuple[IecaDistance, FrontierChange | None]:
        if current.crawled_in(message.cycle):
            return current, None
        new = IecaDistance(self.params.seed_distance, current.crawled_cycle)
        return new, self._entry(key, new, message.crawl_id, message.cycle, None, clock)

    def _entry(
        self,
        url: str,
        state: IecaDistance,
        crawl_id: str,
        cycle: int,
        via: str | None,
        clock: CrawlClock,
    ) -> FrontierChange:
        echo = {ECHO_DISTANCE: fmt_float(state.distance)}
        return self._entries.entry(url, -state.distance, crawl_id, cycle, via, clock, echo)

    encode_state = staticmethod(encode_ieca)  # one call less per state written

    encode_states = staticmethod(encode_ieca_many)

    decode_state = staticmethod(decode_ieca)


__all__ = ["ECHO_DISTANCE", "NOT_CRAWLED", "IecaStrategy"]
