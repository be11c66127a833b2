"""A forager fleet and its reinforcing agent as the keyed state of one crawl (seeds 002/004).

The fleet is a closed feedback loop: every step of every forager starts from the agent's
verdicts on everything sent before it (only the first submitter of a document is
rewarded), and the agent's multiply and delete decisions change who walks next. The
streaming form keeps the whole loop in one state per crawl, `FleetState`, so one key's
operator sees every message in order and a replay, the embedded engine and Beam give the
same fleet bit for bit. What keeps that state small: at most `max_population` foragers,
and the agent's memory of documents is pruned after `max_age_ms` (a document older than
24 hours can never be relevant again, so its verdict is no longer needed).

A step is the paper's (seed 002 §4.1, and `pipelines/evaluation/forager_fleet.run_fleet`,
the direct simulation): the forager asks for the page it chose (a *visit*); when it comes
back, for every page it links to that the path has not visited (*probes*: a forager must
download a page to know its state vector x); when every probe is back, it sends the
possibly relevant documents to the agent, takes the rewards, and — its time slice over —
the agent manages it and hands the turn on. Each request is one frontier entry; the entry's
`cycle` is the step number, so every download of a step is a first fetch of its cycle for
the step core and fetchers (a revisit of a hub page is a new cycle, never a repeat).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from enum import IntEnum

import numpy as np

from frontierflow.state.codec import StateCodecError
from frontierflow.state.forager import (
    ForagerState,
    Reader,
    Variant,
    Vector,
    decode_forager,
    encode_forager,
)
from frontierflow.state.forager_agent import (
    AgentParams,
    Decision,
    DocumentVerdict,
    Fleet,
    decode_fleet,
    encode_fleet,
    judge,
    manage_forager,
    new_fleet,
    next_forager,
    score_send,
)
from frontierflow.state.foraging import (
    ForagerParams,
    add_reward,
    is_possibly_relevant,
    multiply,
    new_forager,
    select_next,
    visit,
)


class Role(IntEnum):
    VISIT = 0
    """The page the forager chose for this step."""
    PROBE = 1
    """A page the chosen one links to, downloaded to learn its x."""


@dataclass(frozen=True, slots=True)
class Download:
    """What one download told the fleet."""

    url: str
    x: Vector
    published_ms: int | None
    on_topic: bool
    links: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """A page the fleet asks the fetchers for: one frontier entry."""

    url: str
    via: str | None
    step: int
    forager_id: int
    role: Role


@dataclass(slots=True)
class FleetStep:
    """The step under way: who walks, what it chose, which probes are still out."""

    number: int
    forager_id: int
    chosen: str
    via: str | None
    chosen_page: Download | None = None
    probes: tuple[str, ...] = ()
    """The chosen page's links not visited in this path, in page order."""
    arrived: dict[str, Download] = field(default_factory=dict)


@dataclass(slots=True)
class FleetCounters:
    downloads: int = 0
    sent: int = 0
    relevant: int = 0
    stale: int = 0
    """Downloads that answered no outstanding request (a duplicate, an old step)."""


@dataclass(slots=True)
class FleetState:
    """Everything one crawl's fleet keeps (its key is `fleet_key(crawl_id)`)."""

    fleet: Fleet
    foragers: dict[int, ForagerState]
    sent: dict[int, dict[str, int]]
    """Per forager, the documents it sent and when (seed 002: "not sent before")."""
    verdicts: dict[str, DocumentVerdict]
    """The agent's memory: documents rewarded, by URL (pruned after `max_age_ms`)."""
    slice_end_ms: int
    step: FleetStep
    counters: FleetCounters = field(default_factory=FleetCounters)


def fleet_key(crawl_id: str) -> str:
    """The key of a crawl's fleet state."""
    return f"fleet:{crawl_id}"


@dataclass(frozen=True, slots=True)
class FleetParams:
    variant: Variant
    seed: int = 0
    forager: ForagerParams = field(default_factory=ForagerParams)
    agent: AgentParams = field(default_factory=AgentParams)


def seed_fleet(
    state: FleetState | None, url: str, now_ms: int, p: FleetParams
) -> tuple[FleetState, list[Request], str | None]:
    """A starting URL joins every forager's weblog at value 0 (seed 002: "the seed URLs
    enter the weblog"). The first one starts the fleet (`min_population` foragers) and the
    first forager's first step. While that step has not been answered, a later seed
    restarts it from the longer list (the same draw): all seeds given together start the
    fleet as one list does. Returns the state, the requests and the URL of a request
    withdrawn (the first choice, when a restart chose another page)."""
    if state is None:
        started = _start(url, (url,), now_ms, p)
        return started, [_request_of(started)], None
    if all(any(u == url for u, _ in f.weblog) for f in state.foragers.values()):
        return state, [], None
    if state.step.number == 1 and state.step.chosen_page is None and not state.counters.stale:
        seeds = (*(u for u, _ in state.foragers[state.step.forager_id].weblog), url)
        restarted = _start(seeds[0], seeds, state.slice_end_ms - p.agent.time_slice_ms, p)
        withdrawn = state.step.chosen if restarted.step.chosen != state.step.chosen else None
        return restarted, [_request_of(restarted)], withdrawn
    foragers = {
        i: f if any(u == url for u, _ in f.weblog) else _append_weblog(f, url, p)
        for i, f in state.foragers.items()
    }
    return replace(state, foragers=foragers), [], None


def _start(first: str, seeds: tuple[str, ...], now_ms: int, p: FleetParams) -> FleetState:
    fleet = new_fleet(p.agent)
    foragers = {i: new_forager(i, p.variant, seeds, p.seed, p.forager) for i in fleet.foragers}
    lead = next_forager(fleet, None)
    blank = FleetStep(0, lead, first, None)
    state = FleetState(fleet, foragers, {i: {} for i in foragers}, {}, 0, blank)
    state.slice_end_ms = now_ms + p.agent.time_slice_ms
    state, _ = _begin_step(state, lead, 1, p)
    return state


def _request_of(state: FleetState) -> Request:
    step = state.step
    return Request(step.chosen, step.via, step.number, step.forager_id, Role.VISIT)


def _append_weblog(f: ForagerState, url: str, p: FleetParams) -> ForagerState:
    return replace(f, weblog=(*f.weblog, (url, 0.0))[: p.forager.weblog_size])


def _begin_step(
    state: FleetState, forager_id: int, number: int, p: FleetParams
) -> tuple[FleetState, list[Request]]:
    f = state.foragers[forager_id]
    in_path = 0 < len(f.path.visited) < p.forager.path_length
    f, chosen = select_next(f, p.seed, p.forager)
    via = state.foragers[forager_id].path.visited[-1] if in_path and f.path.visited else None
    state.foragers = {**state.foragers, forager_id: f}
    state.step = FleetStep(number, forager_id, chosen, via)
    return state, [Request(chosen, via, number, forager_id, Role.VISIT)]


def observe(
    state: FleetState, step: int, download: Download, now_ms: int, p: FleetParams
) -> tuple[FleetState, list[Request]]:
    """A download came back for request `step`: the chosen page sends out its probes, a
    probe is noted; the last one closes the step. A download no request waits for (a
    duplicate, an old step) changes nothing but a counter."""
    current = state.step
    state = replace(state, counters=replace(state.counters))
    if step != current.number:
        state.counters.stale += 1
        return state, []
    if current.chosen_page is None and download.url == current.chosen:
        state.counters.downloads += 1
        visited = set(state.foragers[current.forager_id].path.visited)
        visited.add(download.url)
        probes = tuple(u for u in dict.fromkeys(download.links) if u not in visited)
        kept = replace(download, links=())  # its links live on as `probes`
        state.step = replace(current, chosen_page=kept, probes=probes, arrived={})
        if not probes:
            return _close_step(state, now_ms, p)
        return state, [
            Request(u, current.chosen, current.number, current.forager_id, Role.PROBE)
            for u in probes
        ]
    if current.chosen_page is not None and download.url in current.probes:
        if download.url in current.arrived:
            state.counters.stale += 1
            return state, []
        state.counters.downloads += 1
        kept = replace(download, links=())  # a probe's own links are not followed
        state.step = replace(current, arrived={**current.arrived, download.url: kept})
        if len(state.step.arrived) == len(current.probes):
            return _close_step(state, now_ms, p)
        return state, []
    state.counters.stale += 1
    return state, []


def _close_step(state: FleetState, now_ms: int, p: FleetParams) -> tuple[FleetState, list[Request]]:
    """The step's pages are in: visit, send, learn; the agent manages the forager when its
    time slice is over; the next step begins (`run_fleet` does the same, in one loop)."""
    step, agent = state.step, p.agent
    fid = step.forager_id
    page = step.chosen_page
    assert page is not None
    probes = [step.arrived[u] for u in step.probes]
    f = visit(state.foragers[fid], page.url, page.x, [(d.url, d.x) for d in probes])
    mine = dict(state.sent[fid])
    verdicts = dict(state.verdicts)
    fleet = state.fleet
    reward = 0.0
    for doc in (page, *probes):
        if not is_possibly_relevant(doc.published_ms, now_ms, doc.url in mine, p.forager):
            continue
        mine[doc.url] = now_ms
        state.counters.sent += 1
        verdict = verdicts.get(doc.url)
        new, answer = judge(verdict, fid, doc.published_ms, now_ms, doc.on_topic, agent)
        if verdict is None and new is not None:
            verdicts[doc.url] = new
        fleet = score_send(fleet, fid, answer.relevant, agent)
        reward += answer.reinforcement
        state.counters.relevant += answer.relevant
    foragers = {**state.foragers, fid: add_reward(f, reward)}
    sent = {**state.sent, fid: mine}
    following = fid
    if now_ms >= state.slice_end_ms:
        fleet, decision, child = manage_forager(fleet, fid, agent)
        if decision is Decision.MULTIPLY and child is not None:
            foragers[fid], foragers[child] = multiply(foragers[fid], child, p.seed, p.forager)
            sent[child] = {}
        elif decision is Decision.DELETE:
            del foragers[fid]
            del sent[fid]
        following = next_forager(fleet, fid)
        state.slice_end_ms = now_ms + agent.time_slice_ms
    horizon = now_ms - p.forager.max_age_ms
    state.verdicts = {u: v for u, v in verdicts.items() if v.rewarded_ms >= horizon}
    state.sent = {i: {u: t for u, t in s.items() if t >= horizon} for i, s in sent.items()}
    state.fleet = fleet
    state.foragers = foragers
    return _begin_step(state, following, step.number + 1, p)


# --- codec -------------------------------------------------------------------------------
#
# Version 1, little-endian: u8 version; the Fleet (forager_agent codec) as u32 length +
# bytes; u16 foragers, each u32 length + the forager codec's bytes; per forager in the same
# order a u32 count of sent documents, each a u16-length URL and an i64 time; u32 verdicts,
# each URL, i64 time, u32 forager; i64 slice end; the step: u32 number, u32 forager, URL
# chosen, u8 has-via (+ URL), u8 has-page (+ download), u16 probes (URLs), u16 arrived
# (downloads); counters 4 × u64. A download: URL, i64 published (−1 none), u8 on topic,
# u16 dimensions + f64s, u16 links (URLs).

_I64 = struct.Struct("<q")


class _Out:
    def __init__(self) -> None:
        self.buf = bytearray()

    def pack(self, fmt: str, *values: int | float) -> None:
        try:
            self.buf += struct.pack(fmt, *values)
        except struct.error as exc:
            raise StateCodecError(f"fleet state field out of range: {exc}") from exc

    def text(self, value: str) -> None:
        raw = value.encode("utf-8", "surrogatepass")
        self.pack("<H", len(raw))
        self.buf += raw

    def blob(self, raw: bytes) -> None:
        self.pack("<I", len(raw))
        self.buf += raw

    def download(self, d: Download) -> None:
        self.text(d.url)
        self.pack("<qBH", -1 if d.published_ms is None else d.published_ms, d.on_topic, len(d.x))
        self.buf += np.asarray(d.x, dtype="<f8").tobytes()
        self.pack("<H", len(d.links))
        for link in d.links:
            self.text(link)


def _read_download(r: Reader) -> Download:
    url = r.text()
    published, on_topic, dims = struct.unpack("<qBH", r.take(11))
    x = r.vector(dims)
    (n,) = r.unpack("<H")
    links = tuple(r.text() for _ in range(int(n)))
    return Download(url, x, None if published < 0 else published, bool(on_topic), links)


def encode_fleet_state(state: FleetState) -> bytes:
    out = _Out()
    out.pack("<B", 1)
    out.blob(encode_fleet(state.fleet))
    ids = list(state.foragers)
    out.pack("<H", len(ids))
    for i in ids:
        out.blob(encode_forager(state.foragers[i]))
    for i in ids:
        sent = state.sent.get(i, {})
        out.pack("<I", len(sent))
        for url, t in sent.items():
            out.text(url)
            out.pack("<q", t)
    out.pack("<I", len(state.verdicts))
    for url, v in state.verdicts.items():
        out.text(url)
        out.pack("<qI", v.rewarded_ms, v.forager_id)
    step = state.step
    out.pack("<qII", state.slice_end_ms, step.number, step.forager_id)
    out.text(step.chosen)
    out.pack("<B", step.via is not None)
    if step.via is not None:
        out.text(step.via)
    out.pack("<B", step.chosen_page is not None)
    if step.chosen_page is not None:
        out.download(step.chosen_page)
    out.pack("<H", len(step.probes))
    for url in step.probes:
        out.text(url)
    out.pack("<H", len(step.arrived))
    for d in step.arrived.values():
        out.download(d)
    c = state.counters
    out.pack("<QQQQ", c.downloads, c.sent, c.relevant, c.stale)
    return bytes(out.buf)


def decode_fleet_state(data: bytes) -> FleetState:
    """The state in `data`; StateCodecError (a ValueError) for anything malformed."""
    r = Reader(bytes(data), "fleet state")
    (version,) = r.unpack("<B")
    if version != 1:
        raise StateCodecError(f"fleet state version {version} is not supported (want 1)")

    def blob() -> bytes:
        (n,) = r.unpack("<I")
        return r.take(int(n))

    fleet = decode_fleet(blob())
    (n,) = r.unpack("<H")
    foragers = [decode_forager(blob()) for _ in range(int(n))]
    sent: dict[int, dict[str, int]] = {}
    for f in foragers:
        (k,) = r.unpack("<I")
        sent[f.forager_id] = {r.text(): int(_I64.unpack(r.take(8))[0]) for _ in range(int(k))}
    (k,) = r.unpack("<I")
    verdicts: dict[str, DocumentVerdict] = {}
    for _ in range(int(k)):
        url = r.text()
        t, fid = struct.unpack("<qI", r.take(12))
        verdicts[url] = DocumentVerdict(t, fid)
    slice_end, number, fid = struct.unpack("<qII", r.take(16))
    chosen = r.text()
    (has_via,) = r.unpack("<B")
    via = r.text() if has_via else None
    (has_page,) = r.unpack("<B")
    page = _read_download(r) if has_page else None
    (k,) = r.unpack("<H")
    probes = tuple(r.text() for _ in range(int(k)))
    (k,) = r.unpack("<H")
    arrived = {d.url: d for d in (_read_download(r) for _ in range(int(k)))}
    counters = FleetCounters(*struct.unpack("<QQQQ", r.take(32)))
    r.done()
    step = FleetStep(number, fid, chosen, via, page, probes, arrived)
    return FleetState(
        fleet, {f.forager_id: f for f in foragers}, sent, verdicts, slice_end, step, counters
    )
