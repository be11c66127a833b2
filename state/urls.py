"""URL checks on the hot path: is this an absolute http(s) URL, what is its host, and what
is its canonical form (the one key a URL has in state and on every topic).

One compiled pattern answers both, about ten times faster than `urllib.parse.urlsplit`,
which matters when every event brings dozens of outlinks; the check's answers for the most
recent URLs are kept (popular pages are linked from many pages). `host_of`, for a URL
already checked, is a few string operations and keeps nothing: on `frontierflow bench` a
cache of 65,536 answers before it missed half the time (99,522 distinct URLs, in turn)
and, missing, cost five times the operations it saved.
"""

from __future__ import annotations

import functools
import re


def _url_pattern(
    group: str, port_digits: int, possessive: bool = False, refused: str = r"\s"
) -> str:
    """An absolute http(s) URL; `group` opens the host and port groups ("(" to capture
    them, "(?:" not to); `possessive` makes its character runs possessive (same language);
    `refused` is the class body of the characters no part may hold (whitespace)."""
    plus = "+" if possessive else ""
    userinfo = rf"(?:[^/?#@{refused}]*{plus}@)?"
    host = group + rf"\[[0-9A-Fa-f:.]+{plus}\]|[^/?#:@{refused}\[\]]+{plus})"  # [IPv6], name
    port = r"(?::" + group + rf"\d{{0,{port_digits}}}{plus}))?"
    rest = rf"(?:[/?#][^{refused}]*{plus})?"  # path, query, fragment: anything but whitespace
    return r"https?://" + userinfo + host + port + rest


_HTTP_URL = re.compile(_url_pattern("(", 5), re.IGNORECASE)
_SHORT_PORT_URL = _url_pattern("(?:", 4, possessive=True)
_HTTP_URL_LINES = re.compile(rf"{_SHORT_PORT_URL}(?:\n{_SHORT_PORT_URL})*", re.IGNORECASE)
"""Newline-separated URLs, each a `_HTTP_URL` whose port (if any) has at most 4 digits, so
it cannot pass 65535: one match checks a page's outlinks, since no URL holds whitespace.
Its runs are possessive (what a run takes is never given back: the character after each
run is one the run cannot hold, so giving back could not help a match) and each URL after
the first is matched after its newline, so no URL is scanned twice."""
_ASCII_URL = _url_pattern("(?:", 4, possessive=True, refused=r"\x00-\x20\x7f")
_ASCII_URL_LINES = re.compile(rf"{_ASCII_URL}(?:\n{_ASCII_URL})*", re.IGNORECASE | re.ASCII)
"""`_HTTP_URL_LINES` for ASCII text, whose parts also refuse the control characters: on
ASCII text whitespace is [\t\n\v\f\r\x1c-\x1f ], and what `isprintable` refuses besides is
the other controls (\x00-\x08, \x0e-\x1b, \x7f), so one match answers both checks (with
ASCII case rules and digits, which are all ASCII text has)."""


@functools.lru_cache(maxsize=1 << 16)
def http_host(url: str, max_chars: int = 8_192) -> str | None:
    """The lowercased host of an absolute http(s) URL, or None if `url` is not one.

    Refused: other schemes, no host, a port above 65535, whitespace or control characters
    anywhere, more than `max_chars` characters.
    """
    if len(url) > max_chars:
        return None
    m = _HTTP_URL.fullmatch(url)
    if m is None:
        return None
    port = m.group(2)
    if port and int(port) > 65535:
        return None
    if not url.isprintable():
        return None
    return m.group(1).lower()


def is_http_url(url: str, max_chars: int = 8_192) -> bool:
    """An absolute http or https URL with a host, no longer than `max_chars`."""
    return http_host(url, max_chars) is not None


def http_urls(urls: tuple[str, ...], max_chars: int = 8_192) -> tuple[str, ...]:
    """The members of `urls` that pass `is_http_url`, in order (`urls` itself when all do).

    The common case, a page whose outlinks are all good, costs one regex match over them
    joined by newlines instead of one call per URL (for ASCII text, the usual, one that
    also refuses the control characters, instead of an `isprintable` scan besides);
    anything unusual (a refused URL, a 5-digit port, a character that is not printable)
    takes the per-URL path.
    """
    if not urls:
        return urls
    if max(map(len, urls)) <= max_chars:
        joined = "\n".join(urls)
        if joined.isascii():  # one scan: the match refuses the controls too
            if (
                joined.count("\n") == len(urls) - 1  # no newline inside a URL
                and _ASCII_URL_LINES.fullmatch(joined) is not None
            ):
                return urls
        elif "".join(urls).isprintable() and _HTTP_URL_LINES.fullmatch(joined) is not None:
            return urls
    good = tuple(u for u in urls if http_host(u, max_chars) is not None)
    return urls if len(good) == len(urls) else good


def host_of(url: str) -> str:
    """The lowercased host of a URL that already passed `is_http_url` (cheap: no regex for
    a bare host name, the common case; anything else — user info, a port, an IPv6
    literal, a query or fragment right after the host — is answered by `http_host`).

    For an arbitrary string use `http_host`, which also checks it.
    """
    parts = url.split("/", 3)
    if len(parts) < 3:
        return http_host(url) or ""
    netloc = parts[2]
    if "@" in netloc or ":" in netloc or "[" in netloc or "?" in netloc or "#" in netloc:
        return http_host(url) or ""
    return netloc.lower()


_DEFAULT_PORTS = {"http": "80", "https": "443"}
_PARTS = re.compile(
    r"(https?)://((?:[^/?#@\s]*@)?)(\[[0-9A-Fa-f:.]+\]|[^/?#:@\s\[\]]+)(?::(\d*))?(.*)",
    re.IGNORECASE | re.DOTALL,
)
_CANONICAL_URL = r"https?://[^A-Z/?#:@\x00-\x20\x7f\[\]]++/[^#\x00-\x20\x7f]*+"
_CANONICAL_LINES = re.compile(rf"{_CANONICAL_URL}(?:\n{_CANONICAL_URL})*", re.ASCII)
_CANONICAL_ONE = re.compile(_CANONICAL_URL, re.ASCII)
"""ASCII URLs already canonical, newline-separated: lowercase scheme and host, no user
info or port, a path, no fragment (and, as `_ASCII_URL_LINES`, nothing a URL may not
hold). One match answers for a page's outlinks in the common case."""


def canonical_url(url: str) -> str:
    """The canonical form of a URL that passed `is_http_url`: scheme and host in lowercase,
    the scheme's default port (80, 443) and an empty port dropped, a port's leading zeros
    dropped, no fragment, the empty path written "/". Everything else — user info, path,
    query and its order, percent-escapes — is kept as it came: two URLs that differ there
    may be different pages, and only the site knows.

    `canonical_url(canonical_url(u)) == canonical_url(u)`; a URL already canonical is
    returned as it is.
    """
    if url.isascii() and _CANONICAL_ONE.fullmatch(url) is not None:
        return url  # the common case: one match, no new string
    m = _PARTS.fullmatch(url)
    if m is None:
        return url
    scheme, userinfo, host, port, rest = m.groups()
    scheme, host = scheme.lower(), host.lower()
    if port:
        port = str(int(port))
    netloc = (
        f"{userinfo}{host}"
        if not port or port == _DEFAULT_PORTS[scheme]
        else (f"{userinfo}{host}:{port}")
    )
    rest = rest.split("#", 1)[0]
    if not rest.startswith("/"):
        rest = "/" + rest
    return f"{scheme}://{netloc}{rest}"


def canonical_http_urls(urls: tuple[str, ...], max_chars: int = 8_192) -> tuple[str, ...]:
    """`http_urls(urls)`, each in its canonical form (`canonical_url`), in order: `urls`
    itself when all are good and canonical, which one match over them answers."""
    if not urls:
        return urls
    if max(map(len, urls)) <= max_chars:
        joined = "\n".join(urls)
        if (
            joined.isascii()
            and joined.count("\n") == len(urls) - 1
            and _CANONICAL_LINES.fullmatch(joined) is not None
        ):
            return urls
    good = http_urls(urls, max_chars)
    canonical = tuple(canonical_url(u) for u in good)
    return urls if canonical == urls else canonical
