"""What LAFC+ (`pipelines/strategies/lafc_plus.py`) keeps per page and how one message changes
it; its encoding is `frontierflow.state.lafc_plus_codec`.

Like Akbari Torkestani 2012's automaton, a fetched page owns its outlinks as actions,
chooses one at a time and learns from the page each choice led to. Unlike it, the page holds
an estimate per action (an *estimator* automaton, as in Thathachar and Sastry's pursuit
algorithms) instead of a probability vector, and chooses greedily. The rules, each a pure
function below:

- graded reward (`page_worth`): a link earns the similarity of the page it led to, optionally
  weighted by how often the page uses the topic's keywords; eq. 6 of the paper gives 1 or 0
  by the step sim ≥ τ_i instead;
- learning (`answered`): the action's estimate becomes that reward (exact for a page that does
  not change), and the page's *harvest* H — what its untried links are expected to earn —
  moves toward it with step max(a, 1/n): the mean of the first 1/a answers, then an
  exponential mean. By default H and n take in only the answers to actions that were untried
  when chosen (`harvest_untried`): a known link chosen again for its known worth is no
  sample of the untried ones. Until the first answer H is the page's own similarity
  (`harvest`), the best-first assumption that neighbouring pages share a topic;
- choice (`best_action`): the enabled action with the largest estimate, an untried action
  counting as H + c/√(1 + n) + (1 − H)·s/(1 + h) (`untried_value`: optimism that fades as
  the page's links are learned, and more of it the fewer hops h the page lies from a seed
  along the path that led to it and the less its links have paid); ties go to the first in
  page order. Its estimate is the priority of
  the page's one outstanding entry, so all pages' choices compete in one frontier;
- credit (`credits_along`, `credited`): the page d hops above the one that chose gets
  γ^d·reward for the action that led down the path, and an action's estimate only rises by a
  credit (a path is worth its best discounted reward); the next direct answer resets it;
- link order (`link_order`): a page's actions are its outlinks with those whose URL names
  the topic's keywords first (by the URL's similarity, `url_terms`), page order kept among
  equals, so of the links a page values equally it tries the ones named for the topic first
  (page order alone puts a manual's navigation links first); optionally those in the page's
  own section (the most leading folders shared with its URL) next;
- a new cycle (`refetched`) enables every action again and keeps every estimate and H;
- an action answered "already fetched" (status 208: another page's choice downloaded it
  first) while its estimate was unknown is marked `SEEN` (`answered` with `skip_seen`) and
  from then on chosen only after every other enabled action (`best_action`): the page that
  downloaded it learned its worth, and asking again would most likely cost another 208
  answer. The first download it answers replaces the mark with the reward.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, count

from frontierflow.state.relevance import Topic, keyword_occurrences, similarity, url_terms

UNKNOWN = -1.0
"""The estimate of an action not tried yet (rewards are in [0, 1])."""
SEEN = -2.0
"""The estimate of an action whose only answers said its page was already fetched (208)."""
NEVER = -1


@dataclass(frozen=True, slots=True)
class LafcPlusParams:
    """LAFC+'s constants, validated once. Defaults: chosen on the sockets and concurrency
    topics of the Debian manuals, `shallow_gap` and `harvest_untried` on the wider
    development set (docs/results/focused.md, the LAFC+ section)."""

    rate: float = 0.5
    """a: the floor of the step size of the harvest H, in (0, 1]."""
    gamma: float = 1.0
    """γ: the discount of a reward credited d hops up the path (γ^d), in [0, 1]. 1: a path
    is worth its best reward wherever it is found, so the next cycle follows known paths to
    relevant pages before it explores (the first LAFC+: 0.5)."""
    depth: int = 6
    """How many pages up the path a reward reaches (1: the page that chose only; the first
    LAFC+: 3)."""
    explore: float = 0.15
    """c: an untried action is worth H + c/√(1 + n), n the page's rewards so far: optimism
    that fades as the page's links are learned, so pages whose links were never tried get
    served before a well-known mediocre region is exhausted. In [0, 1]."""
    evidence: int = 0
    """A page's worth is its similarity times min(1, keyword occurrences / evidence): a page
    naming a keyword once is weak evidence however high its cosine (0: the cosine alone)."""
    skip_seen: int = 1
    """1: an action answered "already fetched" before any download is marked `SEEN` and
    chosen last from then on; 0: it stays untried (the first LAFC+)."""
    url_order: int = 0
    """1: a page's actions are ordered by their URL's similarity to the topic, page order
    among equals (`link_order`); 0: page order (measured, not chosen: docs/RESULTS.md)."""
    shallow_power: int = 1
    """p: the depth bonus is s/(1 + h)^p. 1: halved at the first hop (today's); 2: a quarter
    there, a ninth at the second, so it stays near the seeds (measured on the development
    set, not chosen: docs/results/focused.md). In 1..4."""
    shallow_gap: int = 1
    """1: the depth bonus times 1 − H, the room the page's harvest leaves, so a region whose
    links pay well gets no push toward its shallow pages (git's manual, where most shallow
    pages are relevant) and one whose first links disappointed gets all of it; 0: the bonus
    alone (chosen on the wider development set: docs/results/focused.md)."""
    harvest_untried: int = 1
    """1: H and n take in only the rewards of actions that were untried when chosen (estimate
    UNKNOWN or SEEN), so H stays what an untried action is expected to earn: from the second
    cycle on a page re-collects its best known links first, and their rewards, taken into H,
    would rank its untried links above its other known good ones (docs/results/focused.md);
    0: every reward (the first LAFC+)."""
    local_first: int = 0
    """1: among equal estimates a page tries first the links that share the most leading
    folders of its own URL (its section), page order among equals (`link_order`); 0: page
    order (measured, not chosen: docs/RESULTS.md)."""
    shallow: float = 0.3
    """s: an untried action of a page h hops from a seed (the length of the path that led to
    it, at most `depth`) is worth s/(1 + h) more: a seed's untried links s, its children's
    s/2, and so on. Topical pages lie shallow (2–3 hops from the index pages on the Debian
    manuals), and a region whose first few links disappointed is otherwise never entered
    again. In [0, 1]; 0: the first LAFC+."""

    def __post_init__(self) -> None:
        if not (isinstance(self.rate, int | float) and 0.0 < self.rate <= 1.0):
            raise ValueError(f"LAFC+ rate must be in (0, 1], got {self.rate!r}")
        if not (isinstance(self.gamma, int | float) and 0.0 <= self.gamma <= 1.0):
            raise ValueError(f"LAFC+ gamma must be in [0, 1], got {self.gamma!r}")
        if not (isinstance(self.explore, int | float) and 0.0 <= self.explore <= 1.0):
            raise ValueError(f"LAFC+ explore must be in [0, 1], got {self.explore!r}")
        if not (isinstance(self.shallow, int | float) and 0.0 <= self.shallow <= 1.0):
            raise ValueError(f"LAFC+ shallow must be in [0, 1], got {self.shallow!r}")
        if not (isinstance(self.shallow_power, int) and 1 <= self.shallow_power <= 4):
            raise ValueError(
                f"LAFC+ shallow_power must be an int in 1..4, got {self.shallow_power!r}"
            )
        if not (isinstance(self.depth, int) and 1 <= self.depth <= 16):
            raise ValueError(f"LAFC+ depth must be an int in 1..16, got {self.depth!r}")
        if not (isinstance(self.evidence, int) and self.evidence >= 0):
            raise ValueError(f"LAFC+ evidence must be an int >= 0, got {self.evidence!r}")
        for flag in ("skip_seen", "url_order", "local_first", "shallow_gap", "harvest_untried"):
            value = getattr(self, flag)
            if value not in (0, 1) or isinstance(value, bool):
                raise ValueError(f"LAFC+ {flag} must be 0 or 1, got {value!r}")


@dataclass(slots=True)
class LafcPlusState:
    """One URL under LAFC+: its actions with their estimates, its harvest, its choice."""

    actions: tuple[str, ...] = ()
    """The page's distinct outlinks in page order (itself left out)."""
    values: list[float] = field(default_factory=list)
    """The estimate of each action: the reward it earned last, UNKNOWN, or SEEN."""
    enabled: list[bool] = field(default_factory=list)
    """Actions not yet answered in `fetched_cycle`."""
    sim: float = -1.0
    """The page's own worth at its last fetch; −1: never fetched."""
    future: float = 0.0
    """H once `answers` > 0: the running estimate of what an untried action earns."""
    answers: int = 0
    """n: how many rewards H has taken in (capped at 2**32 − 1)."""
    fetched_cycle: int = NEVER
    """The last cycle the page was fetched in."""
    pending: int = -1
    """The action whose answer is awaited; −1: none."""
    path: tuple[str, ...] = ()
    """The pages whose choices led to this page at its last fetch, nearest first."""
    encoded_actions: bytes | None = field(default=None, compare=False, repr=False)
    """The codec's (`lafc_plus_codec`): `actions` as encoded and checked, kept by every rule that
    keeps the actions, so writing a page after an answer encodes only what changed (its
    hundreds of URLs are the bulk of its bytes). None: not encoded yet. Never set by hand."""
    encoded_path: bytes | None = field(default=None, compare=False, repr=False)
    """The codec's: `path` as encoded and checked, kept like `encoded_actions` by every rule
    that keeps the path (all but `refetched` along a new path). Never set by hand."""
    encoded: bytes | None = field(default=None, init=False, compare=False, repr=False)
    """The codec's: this state's whole encoding once it was written. No rule changes a state
    in place (each returns a new one, which starts without it, as does `dataclasses.replace`),
    so a state written again unchanged (a credit that raised nothing: the engine writes every
    state a step touched) is not encoded again."""


MAX_ANSWERS = 2**32 - 1
"""The largest answer count a state holds (the count saturates there)."""


def page_worth(topic: Topic, terms: Mapping[str, int], params: LafcPlusParams) -> float:
    """The reward a page is worth: its similarity (Akbari Torkestani 2012, eqs. 4–5), times
    min(1, keyword occurrences / evidence) when `evidence` is set."""
    sim = similarity(topic, terms)
    if params.evidence:
        sim *= min(1.0, keyword_occurrences(topic, terms) / params.evidence)
    return sim


def link_order(
    topic: Topic, outlinks: Iterable[str], params: LafcPlusParams, page: str = ""
) -> tuple[str, ...]:
    """A page's actions in the order it breaks ties between equal estimates, a stable sort of
    page order: with `url_order`, by the similarity of each URL's own terms (`url_terms`) to
    the topic, highest first; then, with `local_first`, by how many leading folders (host
    included) a link's URL shares with the page's URL `page`, most first."""
    links = tuple(outlinks)
    keys: list[tuple[float, ...]] = [() for _ in links]
    if params.url_order:
        keywords = tuple(topic.weights)
        for i, url in enumerate(links):
            lower = url.lower()
            # a URL that holds no keyword as a substring has no keyword token: skip tokenising
            worth = 0.0
            if any(keyword in lower for keyword in keywords):
                worth = similarity(topic, url_terms(url))
            keys[i] = (-worth,)
    if params.local_first and page:
        home = _folders(page)
        for i, url in enumerate(links):
            keys[i] = (*keys[i], -_shared(home, _folders(url)))
    if not params.url_order and not params.local_first:
        return links
    order = sorted(range(len(links)), key=keys.__getitem__)
    return tuple(links[i] for i in order)


def _folders(url: str) -> list[str]:
    """The host and the folders of `url`'s path: "https://h/a/b/c.html" -> ["h", "a", "b"]."""
    rest = url.partition("://")[2] or url
    return rest.split("?", 1)[0].split("#", 1)[0].split("/")[:-1]


def _shared(a: list[str], b: list[str]) -> int:
    """How many leading elements `a` and `b` have in common (at most the shorter's length)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def harvest(state: LafcPlusState) -> float:
    """H: the learned estimate once a reward came in; before that the page's own worth."""
    return state.future if state.answers > 0 else state.sim


def refetched(
    state: LafcPlusState | None,
    outlinks: Sequence[str],
    sim: float,
    cycle: int,
    path: tuple[str, ...] = (),
) -> LafcPlusState:
    """The page after its (first) fetch in `cycle` along `path`: the actions are the new
    outlinks, each keeping the estimate it had under the same URL; all enabled; nothing
    pending."""
    if not (math.isfinite(sim) and 0.0 <= sim <= 1.0 + 1e-9):
        raise ValueError(f"a page's worth must be in [0, 1], got {sim}")
    base = state if state is not None else LafcPlusState()
    actions = tuple(dict.fromkeys(outlinks))
    encoded = None
    if actions == base.actions:
        actions, values, encoded = base.actions, list(base.values), base.encoded_actions
    else:
        old = dict(zip(base.actions, base.values, strict=True))
        values = [old.get(action, UNKNOWN) for action in actions]
    return LafcPlusState(
        actions,
        values,
        [True] * len(actions),
        sim,
        base.future,
        base.answers,
        max(base.fetched_cycle, cycle),
        -1,
        path,
        encoded,
        base.encoded_path if path == base.path else None,
    )


def child_path(key: str, state: LafcPlusState, params: LafcPlusParams) -> tuple[str, ...]:
    """The path a page's choices carry to the pages they lead to: the page, then its own
    path, `depth` pages at most."""
    return (key, *state.path)[: params.depth]


def credits_along(
    path: Sequence[str], reward: float, params: LafcPlusParams
) -> list[tuple[str, str, float]]:
    """(page, its action, credit) for every page d ≥ 1 hops above the one that chose:
    page path[d] gets γ^d·reward for its action path[d − 1] (an eligibility trace with
    λ = γ, the direct answer to path[0] being d = 0)."""
    out = []
    for d in range(1, min(len(path), params.depth)):
        out.append((path[d], path[d - 1], reward * params.gamma**d))
    return out


def credited(state: LafcPlusState, action: str, credit: float) -> LafcPlusState | None:
    """The page after a descendant reached through `action` earned `credit`: the action's
    estimate rises to the credit if below it (a path is worth its best discounted reward);
    None when nothing changes (an action the page no longer has, or a lower credit)."""
    if not (math.isfinite(credit) and credit >= 0.0):
        raise ValueError(f"a credit must be finite and >= 0, got {credit}")
    try:
        index = state.actions.index(action)
    except ValueError:
        return None
    if state.values[index] >= credit:
        return None
    values = list(state.values)
    values[index] = credit
    return LafcPlusState(
        state.actions,
        values,
        list(state.enabled),
        state.sim,
        state.future,
        state.answers,
        state.fetched_cycle,
        state.pending,
        state.path,
        state.encoded_actions,
        state.encoded_path,
    )


def untried_value(state: LafcPlusState, params: LafcPlusParams) -> float:
    """What an action not tried yet is worth: H + c/√(1 + n) + s/(1 + h)^p, h = len(path), the
    last term times 1 − H with `shallow_gap`."""
    optimism = params.explore / math.sqrt(1.0 + state.answers)
    h = harvest(state)
    bonus = params.shallow / (1.0 + len(state.path)) ** params.shallow_power
    if params.shallow_gap:
        bonus *= max(0.0, 1.0 - h)
    return h + optimism + bonus


def best_action(state: LafcPlusState, params: LafcPlusParams) -> tuple[int, float] | None:
    """(index, estimate) of the enabled action with the largest estimate, an untried one
    counting as `untried_value`; ties to the first in page order. `SEEN` actions come after
    all others, the first enabled one at estimate 0. None if none is enabled."""
    # At C speed (pages have hundreds of actions; this runs at every answer): the best known
    # estimate and the first untried action, each the first enabled one in page order.
    values, enabled = state.values, state.enabled
    top = max(compress(values, enabled), default=None)
    if top is None:
        return None
    untried = _first_enabled(state, UNKNOWN)
    if top < 0.0:  # nothing known among the enabled actions
        if untried >= 0:
            return untried, untried_value(state, params)
        return next(compress(count(), enabled)), 0.0  # all SEEN: the first, at 0
    known = _first_enabled(state, top)
    if untried < 0:
        return known, top
    prior = untried_value(state, params)
    if prior > top or (prior == top and untried < known):
        return untried, prior
    return known, top


def choosing(state: LafcPlusState, index: int) -> LafcPlusState:
    """The page with action `index` outstanding (`pending`), as a new state."""
    if not -1 <= index < len(state.actions):
        raise ValueError(f"action index {index} out of range for {len(state.actions)} actions")
    return LafcPlusState(
        state.actions,
        state.values,
        state.enabled,
        state.sim,
        state.future,
        state.answers,
        state.fetched_cycle,
        index,
        state.path,
        state.encoded_actions,
        state.encoded_path,
    )


def _first_enabled(state: LafcPlusState, value: float) -> int:
    """The first enabled action whose estimate is `value`; −1 if none. Each search for the
    next action with that estimate runs at C speed (`list.index`); an action disabled this
    cycle is passed over."""
    values, enabled = state.values, state.enabled
    index = -1
    try:
        while True:
            index = values.index(value, index + 1)
            if enabled[index]:
                return index
    except ValueError:  # no further action with that estimate
        return -1


def answered(
    state: LafcPlusState, index: int, reward: float | None, params: LafcPlusParams
) -> LafcPlusState:
    """The page after action `index` was answered: disabled for the cycle, and with a
    `reward` (None: the page was already fetched this cycle, nothing to learn) the action's
    estimate set to it and, unless `harvest_untried` and the action had an estimate
    (the reward of a known link chosen again), n ← n + 1 and H ← H + max(a, 1/n)·(reward − H)
    (the first reward sets H). Without a reward an action with an unknown estimate becomes
    `SEEN` when `skip_seen`."""
    if not 0 <= index < len(state.actions):
        raise ValueError(f"action index {index} out of range for {len(state.actions)} actions")
    enabled = list(state.enabled)
    enabled[index] = False
    if reward is None:
        values = state.values  # shared unless marked: no rule changes a list in place
        if params.skip_seen and values[index] == UNKNOWN:
            values = list(values)
            values[index] = SEEN
        return LafcPlusState(
            state.actions,
            values,
            enabled,
            state.sim,
            state.future,
            state.answers,
            state.fetched_cycle,
            -1,
            state.path,
            state.encoded_actions,
            state.encoded_path,
        )
    if not (math.isfinite(reward) and reward >= 0.0):
        raise ValueError(f"a reward must be finite and >= 0, got {reward}")
    values = list(state.values)
    untried = values[index] < 0.0
    values[index] = reward
    n, future = state.answers, state.future
    if untried or not params.harvest_untried:
        n = min(n + 1, MAX_ANSWERS)
        future += max(params.rate, 1.0 / n) * (reward - future)
    return LafcPlusState(
        state.actions,
        values,
        enabled,
        state.sim,
        future,
        n,
        state.fetched_cycle,
        -1,
        state.path,
        state.encoded_actions,
        state.encoded_path,
    )
