"""The fetcher's HTTP client against a real server on loopback: redirects and their limit,
the size cap, the content-type check, refused addresses, unreachable hosts, --resolve."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from frontierflow.connectors.fetcher import http
from frontierflow.connectors.fetcher.settings import FetcherSettings, parse_resolve
from frontierflow.connectors.htmlpages import page_links, page_links_and_terms

PAGE = b"""<html><body><nav><a href="/nav.html">socket socket socket</a></nav>
<p>A TCP socket and a UDP socket.</p><a href="b.html#x">b</a><a href="b.html">again</a>
<a href="mailto:x@y">mail</a><a href="/a.html">self</a><a href="http://other.test:81/z?q=1">z</a>
</body></html>"""


def _app() -> web.Application:
    app = web.Application()

    async def page(_: web.Request) -> web.Response:
        return web.Response(body=PAGE, content_type="text/html")

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"/loop/{int(request.match_info['n']) + 1}")

    async def hop(_: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/a.html")

    async def away(_: web.Request) -> web.Response:
        raise web.HTTPFound("http://elsewhere.test/x.html")

    async def big(_: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(_)
        for _i in range(10 * 16):  # 10 MB in 64 KB chunks, no Content-Length
            await resp.write(b"x" * 65536)
        return resp

    async def image(_: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG....", content_type="image/png")

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(2)  # the server being slow; the client's timeout is what's tested
        return web.Response(text="late")

    app.router.add_get("/a.html", page)
    app.router.add_get("/loop/{n}", loop)
    app.router.add_get("/hop", hop)
    app.router.add_get("/away", away)
    app.router.add_get("/big.html", big)
    app.router.add_get("/pic.png", image)
    app.router.add_get("/slow", slow)
    return app


@pytest.fixture
def serve() -> Callable[[Callable[[str, FetcherSettings], Awaitable[Any]]], Any]:
    """Run `check(base_url, settings)` against the app served on 127.0.0.1."""

    def run(check: Callable[[str, FetcherSettings], Awaitable[Any]], **kw: Any) -> Any:
        async def main() -> Any:
            runner = web.AppRunner(_app())
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            settings = FetcherSettings(
                fetcher_id="t",
                delay_s=0.0,
                allow_private=True,
                resolve={("site.test", port): "127.0.0.1"},
                **kw,
            )
            try:
                return await check(f"http://site.test:{port}", settings)
            finally:
                await runner.cleanup()

        return asyncio.run(main())

    return run


async def _get(base: str, settings: FetcherSettings, path: str) -> http.PageOutcome:
    async def rest() -> None:
        return None

    async with http.open_session(settings) as session:
        return await http.fetch_page(session, base + path, settings, rest)


def test_page_outlinks_and_terms_like_the_recorded_webs(serve: Any) -> None:
    out = serve(lambda base, s: _get(base, s, "/a.html"))
    assert out.status == 200 and out.body == PAGE and out.size == len(PAGE)
    page = page_links_and_terms(out.final_url, out.body, keep_query=False)
    base = out.final_url.rsplit("/", 1)[0]
    # nav links kept, fragment and query dropped, each once, the page itself and mailto out
    assert page.outlinks == (f"{base}/nav.html", f"{base}/b.html", "http://other.test:81/z")
    # nav text left out; stop words ("a", "and", "again") dropped
    assert page.terms == {"tcp": 1, "socket": 2, "udp": 1, "b": 1, "mail": 1,
                          "self": 1, "z": 1}  # fmt: skip


def test_follow_hosts_keeps_only_links_on_those_hosts() -> None:
    hrefs = ["/x", "http://other.test:81/z", "https://b.test/y"]
    follow = frozenset({"a.test:8", "b.test"})
    assert page_links("http://a.test:8/p", hrefs, keep_query=False, follow_hosts=follow) == (
        "http://a.test:8/x",
        "https://b.test/y",
    )


def test_same_host_redirect_followed_off_host_reported(serve: Any) -> None:
    out = serve(lambda base, s: _get(base, s, "/hop"))
    assert out.status == 200 and out.final_url.endswith("/a.html")
    away = serve(lambda base, s: _get(base, s, "/away"))
    assert away.status == 302 and away.redirect_to == "http://elsewhere.test/x.html"


def test_redirect_loop_ends_at_the_limit(serve: Any) -> None:
    out = serve(lambda base, s: _get(base, s, "/loop/0"), max_redirects=3)
    assert out.status == http.TOO_MANY_REDIRECTS
    # /loop/0 .. /loop/3 requested (3 redirects followed); the 4th pointed at /loop/4
    assert out.final_url.endswith("/loop/4") and "more than 3 redirects" in out.reason


def test_ten_megabyte_page_is_cut_at_the_cap(serve: Any) -> None:
    out = serve(lambda base, s: _get(base, s, "/big.html"), max_bytes=1_000_000)
    assert out.status == http.TOO_LARGE and out.body is None
    assert 1_000_000 < out.size <= 1_000_000 + 65536


def test_non_html_body_not_read_and_slow_server_times_out(serve: Any) -> None:
    pic = serve(lambda base, s: _get(base, s, "/pic.png"))
    assert pic.status == 200 and pic.body is None and "image/png" in pic.reason
    slow = serve(lambda base, s: _get(base, s, "/slow"), read_timeout_s=0.5)
    assert slow.status == http.TIMEOUT


def test_loopback_refused_unless_allowed_and_unreachable_port() -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now

    async def get(url: str, **kw: Any) -> http.PageOutcome:
        settings = FetcherSettings(fetcher_id="t", **kw)
        return await _get(url, settings, "")

    refused = asyncio.run(get(f"http://127.0.0.1:{port}/"))
    assert refused.status == http.BLOCKED_ADDRESS
    by_name = asyncio.run(
        get(f"http://site.test:{port}/", resolve={("site.test", port): "127.0.0.1"})
    )
    assert by_name.status == http.BLOCKED_ADDRESS and "non-public" in by_name.reason
    unreachable = asyncio.run(get(f"http://127.0.0.1:{port}/", allow_private=True))
    assert unreachable.status == http.TRANSPORT_ERROR and "cannot connect" in unreachable.reason
    assert asyncio.run(get("ftp://x.test/")).status == http.BAD_URL


def test_parse_resolve_like_curl() -> None:
    assert parse_resolve(["a.test:80:127.0.0.1", "b.test:443:[::1]"]) == {
        ("a.test", 80): "127.0.0.1",
        ("b.test", 443): "::1",
    }
    with pytest.raises(ValueError, match="HOST:PORT:ADDR"):
        parse_resolve(["a.test:127.0.0.1"])
    with pytest.raises(ValueError, match="not an IP address"):
        parse_resolve(["a.test:80:localhost"])


def test_links_resolve_against_the_page_whatever_its_shape() -> None:
    def links(page: str, hrefs: list[str]) -> tuple[str, ...]:
        return page_links(page, hrefs, keep_query=False)

    assert links("http://a.test", ["b.html", "?q=1"]) == ("http://a.test/b.html",)
    assert links("http://a.test/x/y.html?p=a/b", ["z.html", "../w.html"]) == (
        "http://a.test/x/z.html",
        "http://a.test/w.html",
    )
    # "?q" is the page itself once the query is dropped, as in the recorded webs
    assert links("http://a.test/x/y.html", ["?q=2", "y.html#top"]) == ()
