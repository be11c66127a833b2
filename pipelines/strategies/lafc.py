"""LAFC, focused crawling with a network of learning automata (Akbari Torkestani 2012), as
an operator.

One automaton per fetched page (state/automaton.py); its actions are the page's outlinks. The
paper's crawl is a depth-first walk driven by a stack S (§3). In a streaming frontier the
stack becomes priorities:

- a page is *pushed* when it is a seed, or when its similarity reaches the control
  threshold C; its push time (the event time of its fetch) is the priority of its entries,
  so the latest push is served first — the top of the stack;
- a pushed page with enabled actions keeps exactly one outstanding frontier entry: the
  action it sampled from its probabilities scaled to the enabled ones (eq. 3). The entry is
  a reply request (`REPLY_ECHO`): the fetcher answers it once, also when the page was
  already fetched in this cycle (status 208, no download);
- the answer routes a `Reinforce` to the parent: reward (eq. 1) when the child's similarity
  reaches the parent's dynamic threshold τ (eq. 6), else penalty (eq. 2), the action is
  disabled for the cycle and the parent samples its next action at the same priority. An
  answer for a page already fetched disables the action without learning (the paper
  removes visited documents from the action set). A page with no enabled action left is
  *popped*: it emits nothing;
- a new cycle (a seed injected again with cycle + 1) re-enables every action, lazily, when
  each page is fetched again; what the automata learned carries over.

Run one fetch at a time, this serves pages in exactly the order of the paper's sequential
stack algorithm when that algorithm also discovers visited documents only when it picks
them (tests/pipelines/strategies/test_lafc.py checks it on small graphs). Randomness is
drawn from (seed, page, counter), so a replay repeats bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from frontierflow.pipelines.core.strategy import (
    Changes,
    CrawlClock,
    EchoFill,
    Fetched,
    Message,
    Reinforce,
    Routed,
    Seed,
    Strategy,
    distinct_outlinks,
)
from frontierflow.pipelines.strategies.base import EntryFactory
from frontierflow.schemas.records import REPLY_ECHO, FetchEvent, FrontierEntry, Removal
from frontierflow.state.automaton import (
    LearningParams,
    choose,
    disable,
    new_automaton,
    reinforce,
    relink,
    start_cycle,
    uniform_draw,
)
from frontierflow.state.lafc import LafcState, decode_lafc, encode_lafc
from frontierflow.state.relevance import Topic, event_terms, similarity

ECHO_PUSH = "lafc.push"
"""Echo field: the push time of the parent that sampled this entry (its priority)."""


@dataclass(frozen=True, slots=True)
class LafcSettings:
    """LAFC's knobs. Defaults are the paper's calibration (Tables 2 and 3)."""

    control_threshold: float = 0.8
    """C: a fetched page continues the crawl path (is pushed) when its similarity ≥ C."""
    learning: LearningParams = field(default_factory=LearningParams)
    seed: int = 0
    """Seed of the automata's random choices."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.control_threshold <= 1.0:
            raise ValueError(f"control threshold C must be in [0, 1], got {self.control_threshold}")


class Lafc(Strategy[LafcState]):
    """Akbari Torkestani 2012's crawler: see the module docstring."""

    name = "lafc"
    family = "lafc"
    routes_links = False
    learns_from_repeats = True
    echo_fill = EchoFill.PARENT
    requests_replies = True
    judges_pages = True

    def __init__(self, topic: Topic, settings: LafcSettings | None = None) -> None:
        self.topic = topic
        self.settings = settings if settings is not None else LafcSettings()
        self._entries = EntryFactory(self.name)

    def similarity(self, event: FetchEvent) -> float:
        """The page's similarity to the topic (eqs. 4–5), from its terms or its text."""
        return similarity(self.topic, event_terms(event.terms, event.text))

    def echo_from_state(self, event: FetchEvent, state: LafcState) -> dict[str, str]:
        """The echo of the parent's reply request when the parent (`event.via`) is waiting
        for exactly this page in this cycle: the page answers its choice. Otherwise {} (a
        page the parent did not choose, or chose in another cycle, teaches it nothing)."""
        automaton = state.automaton
        if automaton is None or state.pending < 0 or automaton.cycle != event.cycle:
            return {}
        if automaton.actions[state.pending] != event.url:
            return {}
        return {ECHO_PUSH: str(state.push_ms), REPLY_ECHO: "1"}

    def route(self, event: FetchEvent) -> Routed:
        sim = self.similarity(event)
        outlinks = tuple(u for u in distinct_outlinks(event.outlinks) if u != event.url)
        fetched = Fetched(event.url, event.crawl_id, event.cycle, outlinks, sim)
        answer = None
        if event.via is not None and ECHO_PUSH in event.echo:
            answer = Reinforce(event.via, event.url, event.crawl_id, event.cycle, sim)
        return Routed(fetched, (), answer)

    def apply(
        self, key: str, state: LafcState | None, message: Message, clock: CrawlClock
    ) -> tuple[LafcState | None, Changes | None]:
        if isinstance(message, Fetched):
            return self._fetched(key, state, message, clock)
        if isinstance(message, Reinforce):
            return self._reinforced(key, state, message, clock)
        if isinstance(message, Seed):
            return self._seeded(key, state, message, clock)
        return state, None  # LAFC routes no Link messages

    def _seeded(
        self, key: str, state: LafcState | None, seed: Seed, clock: CrawlClock
    ) -> tuple[LafcState | None, Changes | None]:
        """A seed is pushed when injected (the bottom of the stack) and asks to be fetched."""
        state = replace(state) if state is not None else LafcState(automaton=None)
        if state.fetched_cycle >= seed.cycle:
            return state, None
        state.push_ms = clock.now_ms
        state.pending = -1
        entry = self._entries.entry(
            key, float(clock.now_ms), seed.crawl_id, seed.cycle, None, clock, {}
        )
        return state, entry

    def _fetched(
        self, key: str, state: LafcState | None, fetched: Fetched, clock: CrawlClock
    ) -> tuple[LafcState | None, Changes | None]:
        """The page's automaton is built (or relinked and re-enabled for a new cycle); a
        seed of this cycle, or a page with similarity ≥ C, is pushed and samples a link."""
        state = replace(state) if state is not None else LafcState(automaton=None)
        cycle = fetched.cycle
        automaton = state.automaton
        if automaton is None:
            automaton = new_automaton(fetched.outlinks, cycle)
        else:
            if automaton.actions != fetched.outlinks:
                automaton = relink(automaton, fetched.outlinks)
            automaton = start_cycle(automaton, cycle)
        state.automaton = automaton
        state.sim = fetched.value
        state.fetched_cycle = cycle
        # on the stack with no choice outstanding: only a seed, pushed when injected (every
        # other pushed page has a pending choice until it is popped)
        seeded = state.push_ms >= 0 and state.pending < 0
        if not seeded:
            tolerance = self.settings.learning.tolerance
            pushed = fetched.value >= self.settings.control_threshold - tolerance
            state.push_ms = clock.now_ms if pushed else -1
        state.pending = -1
        removal = Removal(key)
        if state.push_ms < 0:
            return state, removal
        entry = self._next_choice(key, state, fetched.crawl_id, cycle, clock)
        return state, removal if entry is None else (removal, entry)

    def _reinforced(
        self, key: str, state: LafcState | None, answer: Reinforce, clock: CrawlClock
    ) -> tuple[LafcState | None, Changes | None]:
        """The answer to this page's outstanding choice: learn, then choose again."""
        if state is None or state.automaton is None or state.pending < 0:
            return state, None  # no choice outstanding: a stale or foreign answer
        automaton = state.automaton
        if automaton.cycle != answer.cycle or automaton.actions[state.pending] != answer.child:
            return state, None
        if answer.fresh:
            automaton, _ = reinforce(automaton, state.pending, answer.value, self.settings.learning)
        else:
            automaton = disable(automaton, state.pending)
        state = replace(state, automaton=automaton, pending=-1)
        return state, self._next_choice(key, state, answer.crawl_id, answer.cycle, clock)

    def _next_choice(
        self, key: str, state: LafcState, crawl_id: str, cycle: int, clock: CrawlClock
    ) -> FrontierEntry | None:
        """Sample the next action of a pushed page, or pop it when none is enabled."""
        assert state.automaton is not None
        u = uniform_draw(self.settings.seed, key, state.draws)
        state.draws += 1
        index = choose(state.automaton, u)
        if index is None:
            state.push_ms = -1  # popped
            return None
        state.pending = index
        echo = {ECHO_PUSH: str(state.push_ms), REPLY_ECHO: "1"}
        return self._entries.entry_owning_echo(
            state.automaton.actions[index],
            float(state.push_ms),
            crawl_id,
            cycle,
            key,
            clock.now_ms,
            echo,
        )

    def encode_state(self, state: LafcState) -> bytes:
        return encode_lafc(state)

    def decode_state(self, data: bytes) -> LafcState:
        return decode_lafc(data)
