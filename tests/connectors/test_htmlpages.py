"""One reader of a page's outlinks and terms, two query policies: pinned on one page."""

from __future__ import annotations

import pytest

from frontierflow.connectors.htmlpages import PageContent, page_links_and_terms

PAGE_URL = "http://site.test/doc/page.html?v=2"
PAGE = b"""<html><body><nav><a href="a.html">navigation words</a></nav>
<p>Sockets over TCP sockets.</p>
<a href="a.html?x=1#s"></a><a href="a.html"></a><a href="#top"></a><a href="?v=3"></a>
<a href="../b c.html"></a><a href="mailto:x@y.z"></a><a href="http://other.test:99999/x"></a>
<a href="https://Other.test/p?q=1#f"></a>
</body></html>"""


@pytest.mark.parametrize(
    ("keep_query", "outlinks"),
    [
        # as written (WARC replay): query kept, fragment cut, repeats and the page itself
        # ("#top", and "?v=3" which is the page with another query) kept, path unquoted
        (
            True,
            (
                "http://site.test/doc/a.html",
                "http://site.test/doc/a.html?x=1",
                "http://site.test/doc/a.html",
                "http://site.test/doc/page.html?v=2",
                "http://site.test/doc/page.html?v=3",
                "http://site.test/b c.html",
                "https://Other.test/p?q=1",
            ),
        ),
        # as the recorded webs store pages (the fetcher): query dropped, path quoted once,
        # each once, without the page itself
        (
            False,
            (
                "http://site.test/doc/a.html",
                "http://site.test/b%20c.html",
                "https://Other.test/p",
            ),
        ),
    ],
)
def test_both_query_policies_on_one_page(keep_query: bool, outlinks: tuple[str, ...]) -> None:
    page = page_links_and_terms(PAGE_URL, PAGE, keep_query=keep_query)
    # mailto: and the invalid port are no links under either policy; the nav's words are
    # chrome, "over" a stop word: the terms do not depend on the policy
    assert page == PageContent(outlinks, {"sockets": 2, "tcp": 1})


def test_follow_hosts_applies_under_both_policies() -> None:
    follow = frozenset({"other.test"})
    for keep_query, url in ((True, "https://Other.test/p?q=1"), (False, "https://Other.test/p")):
        page = page_links_and_terms(PAGE_URL, PAGE, keep_query=keep_query, follow_hosts=follow)
        assert page.outlinks == (url,)
