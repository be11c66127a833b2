"""A web that pushes back, served on 127.0.0.1 for crawl tests of the frontier: one aiohttp
server in a background thread, with virtual hosts (told apart by the ``Host`` header) that are
finite and good, rate limited (429 + Retry-After), an endless calendar trap, slow, flaky (503),
asking for a crawl delay, and redirecting to another host. Every request is logged, so a test
can check afterwards what the crawler did: requests inside announced pauses, pages served, the
smallest gap between requests to a host.

Sites (defaults; ``PORT`` is the one free port every host name is served on):

- good.test: ``good_pages`` = 300 pages = 1 index ``/`` + 10 sections ``/s/<k>/`` (k = 1..10)
  + 289 articles ``/s/<k>/a<j>.html``; the articles are spread over the sections as evenly as
  possible, the first ones taking one more: 289 = 9 × 29 + 1 × 28 (sections 1–9 have 29,
  section 10 has 28). ``/`` also links once to ``http://calendar.test:PORT/day/1``.
- busy.test, slow.test, flaky.test, polite.test: small trees of ``n`` pages: ``/`` is page 0,
  ``/p<i>.html`` page i (1 ≤ i < n); page i links to pages 2i+1 and 2i+2 (when < n) and,
  unless it is ``/``, back to ``/``.
- busy.test: once ``busy_burst`` pages were answered 200 within the last ``busy_window_s``
  seconds, the next request starts a pause of ``busy_retry_after_s`` seconds during which
  every request (robots.txt excepted) is answered 429, each with a Retry-After announcing the
  rest of the pause (in seconds, rounded up; or an HTTP date rounded up to the next whole
  second; or no header at all). The check is made again on the first request after the pause,
  so when the window is longer than the pause, that request may start a new one.
- calendar.test: ``/day/N`` (N ≥ 1) links to days N+1, N+2, N+3 and ``/``; ``/`` to day 1.
- slow.test: every request but robots.txt is answered after ``slow_delay_s`` seconds.
- flaky.test: the first ``flaky_failures`` requests (robots.txt not counted) get 503 without
  Retry-After; then it serves a tree of 10 pages.
- polite.test: robots.txt asks ``Crawl-delay: 2``; a tree of 10 pages (the delay is not
  enforced: `HostileWeb.min_gap` tells whether a crawler kept it).
- moved.test: every path but robots.txt answers 301 to ``http://good.test:PORT/``.
- every known host answers ``/robots.txt`` with 200 (``User-agent: *`` / ``Allow: /``; polite.test
  as above), never rate limited or failed on purpose; unknown hosts and paths get 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from types import TracebackType
from typing import Literal

from aiohttp import hdrs, web

RetryAfterForm = Literal["seconds", "date", "none"]

GOOD_SECTIONS = 10
FLAKY_PAGES = 10
POLITE_PAGES = 10
POLITE_CRAWL_DELAY_S = 2
ROBOTS_PATH = "/robots.txt"
ALLOW_ALL_ROBOTS = "User-agent: *\nAllow: /\n"
POLITE_ROBOTS = f"User-agent: *\nCrawl-delay: {POLITE_CRAWL_DELAY_S}\n"

_SECTION = re.compile(r"/s/([1-9][0-9]*)/")
_ARTICLE = re.compile(r"/s/([1-9][0-9]*)/a([1-9][0-9]*)\.html")
_TREE_PAGE = re.compile(r"/p([1-9][0-9]*)\.html")
_DAY = re.compile(r"/day/([1-9][0-9]*)")


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the server saw it; times are ``time.time()`` seconds."""

    host: str  # the Host header, lower case, without port
    path: str  # path and query as requested
    started: float  # when the request arrived
    answered: float  # just before the response was returned
    status: int
    retry_after_until: float | None  # end of the pause a 429/503 Retry-After announced


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: str = ""
    content_type: str = "text/html"
    headers: tuple[tuple[str, str], ...] = ()
    retry_after_until: float | None = None


def http_date_up(moment: float) -> tuple[str, float]:
    """``moment`` rounded UP to a whole second, as an HTTP date and as epoch seconds."""
    end = math.ceil(moment)
    return format_datetime(datetime.fromtimestamp(end, tz=UTC), usegmt=True), float(end)


def good_section_sizes(good_pages: int) -> list[int]:
    """Articles per section (sections 1..10 in order) for a good site of ``good_pages``
    pages: what the index and the 10 sections leave, spread evenly, the first ones taking
    one more."""
    articles = good_pages - 1 - GOOD_SECTIONS
    if articles < 0:
        raise ValueError(f"good_pages must be at least {1 + GOOD_SECTIONS}, not {good_pages}")
    each, extra = divmod(articles, GOOD_SECTIONS)
    return [each + (1 if k < extra else 0) for k in range(GOOD_SECTIONS)]


def _host_name(header: str) -> str:
    """The Host header without its port, lower case, without a trailing dot."""
    bracketed = header.startswith("[")  # an IPv6 literal
    name = header[: header.find("]") + 1] if bracketed else header.partition(":")[0]
    return name.strip().rstrip(".").lower()


def _page(title: str, hrefs: list[str]) -> str:
    items = "\n".join(
        f'<li><a href="{html.escape(h, quote=True)}">{html.escape(h)}</a></li>' for h in hrefs
    )
    return (
        f"<!doctype html>\n<html><head><title>{html.escape(title)}</title></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n<ul>\n{items}\n</ul></body></html>\n"
    )


def _tree_page(path: str, n: int) -> int | None:
    """Index of the tree page at ``path`` in a tree of ``n`` pages, None if there is none."""
    if path == "/":
        return 0 if n > 0 else None
    m = _TREE_PAGE.fullmatch(path)
    if m is None:
        return None
    i = int(m.group(1))
    return i if i < n else None


def _tree_path(i: int) -> str:
    return "/" if i == 0 else f"/p{i}.html"


class HostileWeb:
    """The server; ``with HostileWeb(**options) as web:`` runs it for the block."""

    def __init__(
        self,
        *,
        good_host: str = "good.test",
        busy_host: str = "busy.test",
        calendar_host: str = "calendar.test",
        slow_host: str = "slow.test",
        flaky_host: str = "flaky.test",
        polite_host: str = "polite.test",
        moved_host: str = "moved.test",
        good_pages: int = 300,
        busy_pages: int = 60,
        busy_burst: int = 5,
        busy_window_s: float = 10.0,
        busy_retry_after_s: int = 15,
        busy_retry_after_form: RetryAfterForm = "seconds",
        slow_pages: int = 20,
        slow_delay_s: float = 3.0,
        flaky_failures: int = 4,
        shutdown_timeout_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        """Epoch seconds for the log and the busy host's window (a test may pass its own)."""
        names = (
            good_host,
            busy_host,
            calendar_host,
            slow_host,
            flaky_host,
            polite_host,
            moved_host,
        )
        self.hosts: tuple[str, ...] = tuple(_host_name(h) for h in names)
        if len(set(self.hosts)) != len(self.hosts):
            raise ValueError(f"host names must differ: {self.hosts}")
        (
            self.good_host,
            self.busy_host,
            self.calendar_host,
            self.slow_host,
            self.flaky_host,
            self.polite_host,
            self.moved_host,
        ) = self.hosts
        if busy_retry_after_form not in ("seconds", "date", "none"):
            raise ValueError(f"unknown Retry-After form {busy_retry_after_form!r}")
        if busy_burst < 1 or busy_retry_after_s < 0 or busy_window_s <= 0:
            raise ValueError("busy_burst ≥ 1, busy_retry_after_s ≥ 0, busy_window_s > 0")
        self._good_sizes = good_section_sizes(good_pages)
        self.good_pages = good_pages
        self.busy_pages = busy_pages
        self.busy_burst = busy_burst
        self.busy_window_s = busy_window_s
        self.busy_retry_after_s = int(busy_retry_after_s)
        self.busy_retry_after_form: RetryAfterForm = busy_retry_after_form
        self.slow_pages = slow_pages
        self.slow_delay_s = slow_delay_s
        self.flaky_failures = flaky_failures
        self._shutdown_timeout_s = shutdown_timeout_s

        self._lock = threading.Lock()
        self._log: list[Request] = []
        # state below is touched only on the server's event loop
        self._busy_served: deque[float] = deque()
        self._busy_blocked_until = 0.0
        self._flaky_seen = 0

        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> HostileWeb:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout_s: float = 10.0) -> HostileWeb:
        """Start the server thread; return once it listens."""
        if self._thread is not None:
            raise RuntimeError("HostileWeb is already started")
        self._thread = threading.Thread(target=self._run, name="hostile-web", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"HostileWeb did not start within {timeout_s} s")
        if self._error is not None:
            self._thread.join(timeout_s)
            raise RuntimeError("HostileWeb failed to start") from self._error
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close the server, end its loop and join its thread (idempotent)."""
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop_event.set)
        thread.join(timeout_s)
        if thread.is_alive():
            raise RuntimeError(f"HostileWeb's thread did not end within {timeout_s} s")
        self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # reported to start(), which re-raises it
            self._error = e
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=self._shutdown_timeout_s)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._port = int(runner.addresses[0][1])
            self._ready.set()
            await self._stop_event.wait()
        finally:
            await runner.cleanup()

    # ---- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("HostileWeb is not started")
        return self._port

    def base(self, host: str) -> str:
        """``http://HOST:PORT``."""
        return f"http://{host}:{self.port}"

    def resolve_args(self) -> list[str]:
        """``HOST:PORT:127.0.0.1`` for every host (curl's --resolve form)."""
        return [f"{h}:{self.port}:127.0.0.1" for h in self.hosts]

    def seeds(self) -> list[str]:
        """The ``/`` URLs of good, busy, calendar and slow hosts."""
        hosts = (self.good_host, self.busy_host, self.calendar_host, self.slow_host)
        return [f"{self.base(h)}/" for h in hosts]

    # ---- the log ---------------------------------------------------------------------------

    def requests(self, host: str | None = None) -> list[Request]:
        """The requests so far (to ``host``, or to all), in the order they were answered."""
        with self._lock:
            return [r for r in self._log if host is None or r.host == host]

    def announced_pauses(self, host: str) -> list[tuple[float, float]]:
        """(start, end) of every pause announced to ``host`` by a Retry-After: from the
        announcing request's arrival to the end it announced."""
        return [
            (r.started, r.retry_after_until)
            for r in self.requests(host)
            if r.retry_after_until is not None
        ]

    def requests_inside_pauses(
        self, host: str | None = None, *, pages_only: bool = False
    ) -> list[Request]:
        """Requests that started strictly inside a pause announced earlier (the announcing
        answer returned before they started) to the same host; ``pages_only`` leaves out
        robots.txt requests."""
        log = self.requests(host)
        announcers = [r for r in log if r.retry_after_until is not None]
        inside: list[Request] = []
        for r in log:
            if pages_only and _is_robots(r.path):
                continue
            for a in announcers:
                assert a.retry_after_until is not None
                if (
                    a.host == r.host
                    and a.answered < r.started
                    and a.started < r.started < a.retry_after_until
                ):
                    inside.append(r)
                    break
        return inside

    def pages_served(self, host: str) -> int:
        """200 answers to ``host`` other than robots.txt."""
        return sum(1 for r in self.requests(host) if r.status == 200 and not _is_robots(r.path))

    def min_gap(self, host: str, *, pages_only: bool = False) -> float | None:
        """Smallest time between a request's arrival at ``host`` and the answer to the one
        before it (by arrival); None with fewer than 2 requests. ``pages_only`` leaves out
        robots.txt requests."""
        log = sorted(
            (r for r in self.requests(host) if not (pages_only and _is_robots(r.path))),
            key=lambda r: r.started,
        )
        if len(log) < 2:
            return None
        return min(b.started - a.answered for a, b in itertools.pairwise(log))

    # ---- serving ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        started = self._clock()
        host = _host_name(request.headers.get(hdrs.HOST, ""))
        answer = await self._answer(host, request.path, started)
        response = web.Response(
            status=answer.status,
            text=answer.body,
            content_type=answer.content_type,
            headers=dict(answer.headers),
        )
        record = Request(
            host=host,
            path=request.path_qs,
            started=started,
            answered=self._clock(),
            status=answer.status,
            retry_after_until=answer.retry_after_until,
        )
        with self._lock:
            self._log.append(record)
        return response

    async def _answer(self, host: str, path: str, now: float) -> _Answer:
        if host not in self.hosts:
            return _not_found()
        if path == ROBOTS_PATH:
            robots = POLITE_ROBOTS if host == self.polite_host else ALLOW_ALL_ROBOTS
            return _Answer(200, robots, content_type="text/plain")
        if host == self.good_host:
            return self._good(path)
        if host == self.busy_host:
            return self._busy(path, now)
        if host == self.calendar_host:
            return self._calendar(path)
        if host == self.slow_host:
            await asyncio.sleep(self.slow_delay_s)
            return self._tree(host, path, self.slow_pages)
        if host == self.flaky_host:
            if self._flaky_seen < self.flaky_failures:
                self._flaky_seen += 1
                return _Answer(503, "<p>Service Unavailable</p>")
            return self._tree(host, path, FLAKY_PAGES)
        if host == self.polite_host:
            return self._tree(host, path, POLITE_PAGES)
        # moved.test
        location = f"{self.base(self.good_host)}/"
        return _Answer(301, _page("Moved", [location]), headers=(("Location", location),))

    def _good(self, path: str) -> _Answer:
        base = self.base(self.good_host)
        sections = [f"{base}/s/{k}/" for k in range(1, GOOD_SECTIONS + 1)]
        if path == "/":
            calendar = f"{self.base(self.calendar_host)}/day/1"
            return _Answer(200, _page(f"{self.good_host} index", [*sections, calendar]))
        m = _SECTION.fullmatch(path)
        if m is not None and int(m.group(1)) <= GOOD_SECTIONS:
            k = int(m.group(1))
            articles = [f"{base}/s/{k}/a{j}.html" for j in range(1, self._good_sizes[k - 1] + 1)]
            others = [s for i, s in enumerate(sections, 1) if i != k]
            return _Answer(200, _page(f"section {k}", [*articles, f"{base}/", *others]))
        m = _ARTICLE.fullmatch(path)
        if m is not None:
            k, j = int(m.group(1)), int(m.group(2))
            if k <= GOOD_SECTIONS and j <= self._good_sizes[k - 1]:
                n = self._good_sizes[k - 1]
                siblings = dict.fromkeys(1 + (j - 1 + d) % n for d in (-1, 1))
                siblings.pop(j, None)
                links = [f"{base}/s/{k}/", *(f"{base}/s/{k}/a{s}.html" for s in siblings)]
                return _Answer(200, _page(f"section {k} article {j}", links))
        return _not_found()

    def _busy(self, path: str, now: float) -> _Answer:
        if now < self._busy_blocked_until:
            return self._too_many(now, starts_pause=False)
        served = self._busy_served
        while served and served[0] <= now - self.busy_window_s:
            served.popleft()
        if len(served) >= self.busy_burst:
            self._busy_blocked_until = now + self.busy_retry_after_s
            return self._too_many(now, starts_pause=True)
        answer = self._tree(self.busy_host, path, self.busy_pages)
        if answer.status == 200:
            served.append(now)
        return answer

    def _too_many(self, now: float, *, starts_pause: bool) -> _Answer:
        body = "<p>Too Many Requests</p>"
        if self.busy_retry_after_form == "none":
            return _Answer(429, body)
        if self.busy_retry_after_form == "date":
            date, end = http_date_up(self._busy_blocked_until)
            return _Answer(429, body, headers=(("Retry-After", date),), retry_after_until=end)
        seconds = (
            self.busy_retry_after_s
            if starts_pause
            else max(0, math.ceil(self._busy_blocked_until - now))
        )
        return _Answer(
            429, body, headers=(("Retry-After", str(seconds)),), retry_after_until=now + seconds
        )

    def _calendar(self, path: str) -> _Answer:
        base = self.base(self.calendar_host)
        if path == "/":
            return _Answer(200, _page("calendar", [f"{base}/day/1"]))
        m = _DAY.fullmatch(path)
        if m is None:
            return _not_found()
        n = int(m.group(1))
        days = [f"{base}/day/{n + d}" for d in (1, 2, 3)]
        return _Answer(200, _page(f"day {n}", [*days, f"{base}/"]))

    def _tree(self, host: str, path: str, n: int) -> _Answer:
        i = _tree_page(path, n)
        if i is None:
            return _not_found()
        base = self.base(host)
        links = [f"{base}{_tree_path(c)}" for c in (2 * i + 1, 2 * i + 2) if c < n]
        if i > 0:
            links.append(f"{base}/")
        return _Answer(200, _page(f"{host} page {i}", links))


def _is_robots(path: str) -> bool:
    return path.partition("?")[0] == ROBOTS_PATH


def _not_found() -> _Answer:
    return _Answer(404, "<p>Not Found</p>")
