"""A forager fleet and its reinforcing agent as the keyed state of one crawl (Palotai,
Farkas & Lőrincz 2005).

The fleet is a closed feedback loop: every step of every forager starts from the agent's
verdicts on everything sent before it (only the first submitter of a document is
rewarded), and the agent's multiply and delete decisions change who walks next. The
streaming form keeps the whole loop in one state per crawl, `FleetState`, so one key's
operator sees every message in order and a replay, the embedded engine and Beam give the
same fleet bit for bit. What keeps that state small: at most `max_population` foragers,
and the agent's memory of documents is pruned after `max_age_ms` (a document older than
24 hours can never be relevant again, so its verdict is no longer needed).

A step is the paper's (long version, §4.1, and `pipelines/evaluation/forager_fleet.run_fleet`,
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
from frontierflow.state.storage.codec import StateCodecError


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
    """Per forager, the documents it sent and when (the paper: "not sent before")."""
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
    """A starting URL joins every forager's weblog at value 0 (the paper: "the seed URLs
    enter the weblog"). The first one starts the fleet (`min_population` foragers) and the
    first forager's first step. While that step has not been answered, a later seed restarts
    it from the longer list (the same draw): all seeds given together start the fleet as one
    list does. Returns the state, the requests and the URL of a request withdrawn (the first
    choice, when a restart chose another page)."""
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
) -> tuple[FleetState, list[Request], str | None]:
    """A download came back for request `step`: the chosen page sends out its probes, a
    probe is noted; the last one closes the step. A download no request waits for (a
    duplicate, an old step) changes nothing but a counter. Returns the state, the new
    requests and the URL of a plain request (no via: a path's first page) now answered,
    which is the fleet's to remove (reply requests are removed by the fetchers)."""
    current = state.step
    state = replace(state, counters=replace(state.counters))
    if step != current.number:
        state.counters.stale += 1
        return state, [], None
    if current.chosen_page is None and download.url == current.chosen:
        answered = current.chosen if current.via is None else None
        state.counters.downloads += 1
        visited = set(state.foragers[current.forager_id].path.visited)
        visited.add(download.url)
        probes = tuple(u for u in dict.fromkeys(download.links) if u not in visited)
        kept = replace(download, links=())  # its links live on as `probes`
        state.step = replace(current, chosen_page=kept, probes=probes, arrived={})
        if not probes:
            return (*_close_step(state, now_ms, p), answered)
        return (
            state,
            [
                Request(u, current.chosen, current.number, current.forager_id, Role.PROBE)
                for u in probes
            ],
            answered,
        )
    if current.chosen_page is not None and download.url in current.probes:
        if download.url in current.arrived:
            state.counters.stale += 1
            return state, [], None
        state.counters.downloads += 1
        kept = replace(download, links=())  # a probe's own links are not followed
        state.step = replace(current, arrived={**current.arrived, download.url: kept})
        if len(state.step.arrived) == len(current.probes):
            return (*_close_step(state, now_ms, p), None)
        return state, [], None
    state.counters.stale += 1
    return state, [], None


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
# Version 1, little-endian, in blocks (a fleet is read and written whole at every step):
# u8 version; the Fleet (forager_agent codec) as u32 length + bytes; u16 foragers, each
# u32 length + the forager codec's bytes; then counts: per forager (same order) u32 sent
# documents, u32 verdicts, i64 slice end, u32 step number, u32 step forager, u8 has-via,
# u8 has-page, u16 probes, u16 arrived, u16 dimensions d of the downloads' x; u32 byte
# length of the URLs, UTF-8, joined by newlines (a URL never holds one), in the order sent
# (forager by forager), verdicts, the chosen page, the via, the page's URL, the probes, the
# arrived downloads; i64 block: sent times, verdict times, the page's publication time
# (−1 none), the arrived ones'; u32 block: verdict foragers; u8 block: the page's and the
# arrived on-topic flags; f64 block: the page's x, the arrived x's; counters 4 × u64.

_COUNTS = struct.Struct("<IqIIBBHHH")
_COUNTERS = struct.Struct("<QQQQ")
_SEP = "\n"


def encode_fleet_state(state: FleetState) -> bytes:
    ids = list(state.foragers)
    step = state.step
    page = step.chosen_page
    downloads = ([page] if page is not None else []) + list(step.arrived.values())
    dims = len(downloads[0].x) if downloads else 0
    if any(len(d.x) != dims for d in downloads):
        raise StateCodecError("fleet downloads hold x of different lengths")
    sent = [state.sent.get(i, {}) for i in ids]
    urls = [u for s in sent for u in s]
    urls += list(state.verdicts)
    urls.append(step.chosen)
    if step.via is not None:
        urls.append(step.via)
    urls += [d.url for d in downloads[:1] if page is not None]
    urls += list(step.probes)
    urls += list(step.arrived)
    if any(_SEP in u for u in urls):
        raise StateCodecError("a fleet URL holds a newline")
    try:
        parts = [struct.pack("<B", 1)]
        fleet = encode_fleet(state.fleet)
        parts.append(struct.pack("<I", len(fleet)) + fleet)
        parts.append(struct.pack("<H", len(ids)))
        for i in ids:
            raw = encode_forager(state.foragers[i])
            parts.append(struct.pack("<I", len(raw)) + raw)
        parts.append(struct.pack(f"<{len(ids)}I", *(len(s) for s in sent)))
        parts.append(
            _COUNTS.pack(
                len(state.verdicts),
                state.slice_end_ms,
                step.number,
                step.forager_id,
                step.via is not None,
                page is not None,
                len(step.probes),
                len(step.arrived),
                dims,
            )
        )
        text = _SEP.join(urls).encode("utf-8")
        parts.append(struct.pack("<I", len(text)) + text)
        times = [t for s in sent for t in s.values()]
        times += [v.rewarded_ms for v in state.verdicts.values()]
        times += [-1 if d.published_ms is None else d.published_ms for d in downloads]
        parts.append(np.asarray(times, dtype="<i8").tobytes())
        parts.append(np.asarray([v.forager_id for v in state.verdicts.values()], "<u4").tobytes())
        parts.append(bytes(bytearray(d.on_topic for d in downloads)))
        if downloads:
            parts.append(np.concatenate([np.asarray(d.x, "<f8") for d in downloads]).tobytes())
        c = state.counters
        parts.append(_COUNTERS.pack(c.downloads, c.sent, c.relevant, c.stale))
    except (struct.error, OverflowError, UnicodeEncodeError) as exc:
        raise StateCodecError(f"fleet state cannot be encoded: {exc}") from exc
    return b"".join(parts)


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
    sent_counts = struct.unpack(f"<{n}I", r.take(4 * int(n)))
    verdicts_n, slice_end, number, fid, has_via, has_page, probes_n, arrived_n, dims = (
        _COUNTS.unpack(r.take(_COUNTS.size))
    )
    downloads_n = int(has_page) + arrived_n
    (size,) = r.unpack("<I")
    try:
        text = r.take(int(size)).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateCodecError(f"fleet state holds invalid UTF-8: {exc}") from exc
    total = sum(sent_counts) + verdicts_n + 1 + has_via + has_page + probes_n + arrived_n
    urls = text.split(_SEP)
    if len(urls) != total:
        raise StateCodecError(f"fleet state names {len(urls)} URLs, not {total}")
    times = np.frombuffer(r.take(8 * (sum(sent_counts) + verdicts_n + downloads_n)), "<i8")
    owners = np.frombuffer(r.take(4 * verdicts_n), "<u4")
    flags = r.take(downloads_n)
    xs = np.frombuffer(r.take(8 * dims * downloads_n), "<f8").astype(np.float64)
    counters = FleetCounters(*_COUNTERS.unpack(r.take(_COUNTERS.size)))
    r.done()
    times_list = times.tolist()
    at = 0
    sent: dict[int, dict[str, int]] = {}
    for f, k in zip(foragers, sent_counts, strict=True):
        sent[f.forager_id] = dict(zip(urls[at : at + k], times_list[at : at + k], strict=True))
        at += k
    verdicts = {
        url: DocumentVerdict(t, int(o))
        for url, t, o in zip(
            urls[at : at + verdicts_n],
            times_list[at : at + verdicts_n],
            owners.tolist(),
            strict=True,
        )
    }
    at += verdicts_n
    pub_at = sum(sent_counts) + verdicts_n
    chosen = urls[at]
    at += 1
    via = urls[at] if has_via else None
    at += has_via
    download_urls = urls[at : at + has_page] + urls[at + has_page + probes_n :]
    probes = tuple(urls[at + has_page : at + has_page + probes_n])
    loaded = [
        Download(
            url,
            xs[i * dims : (i + 1) * dims],
            None if times_list[pub_at + i] < 0 else times_list[pub_at + i],
            bool(flags[i]),
        )
        for i, url in enumerate(download_urls)
    ]
    page = loaded[0] if has_page else None
    arrived = {d.url: d for d in loaded[int(has_page) :]}
    step = FleetStep(number, fid, chosen, via, page, probes, arrived)
    return FleetState(
        fleet, {f.forager_id: f for f in foragers}, sent, verdicts, slice_end, step, counters
    )
