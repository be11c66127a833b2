"""An HTML tree read as a recorded web: URLs, CSR links, chrome-free terms and the parse cache."""

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from frontierflow.connectors import topicalweb
from frontierflow.connectors.debiandocs import DEBIAN_DOC_ROOTS, debian_docs_dir
from frontierflow.connectors.topicalweb import (
    TopicalWeb,
    WebFormatError,
    cache_key,
    load_web,
    page_files,
    read_html_tree,
    read_saved_web,
    save_web,
    web_roots,
)

TINYWEB = Path(__file__).resolve().parents[1] / "data" / "tinyweb"
BASE = "http://tiny.test/"


@pytest.fixture(scope="module")
def tiny() -> TopicalWeb:
    return read_html_tree([(TINYWEB, BASE)])


@pytest.fixture
def tiny_copy(tmp_path: Path) -> Path:
    """A writable copy of tinyweb."""
    return Path(shutil.copytree(TINYWEB, tmp_path / "tinyweb"))


def _same_web(a: TopicalWeb, b: TopicalWeb) -> None:
    assert a.urls == b.urls
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_array_equal(a.links, b.links)
    assert a.terms == b.terms


def test_urls_are_base_plus_sorted_relative_paths(tiny: TopicalWeb) -> None:
    assert tiny.urls == [
        "http://tiny.test/a.html",
        "http://tiny.test/empty.html",
        "http://tiny.test/index.html",
        "http://tiny.test/sub/b.html",
        "http://tiny.test/sub/c.html",
        "http://tiny.test/sub/gr%C3%B6%C3%9Fe.html",  # größe.html, percent-encoded once
    ]
    assert tiny.num_pages == 6
    assert tiny.index_of("http://tiny.test/sub/größe.html") == 5
    assert tiny.index_of("http://tiny.test/sub/c.html#anchor") == 4
    with pytest.raises(KeyError):
        tiny.index_of("http://tiny.test/missing.html")


def test_links_in_csr_exactly(tiny: TopicalWeb) -> None:
    # Worked out from the pages, in document order, first occurrence kept, self-links dropped:
    # 0 a.html:     related index(2), sub/b(3), missing(-), sub/b(dup), sidebar sub/c(4), footer
    #               index(dup)                                                    -> [2, 3, 4]
    # 1 empty.html: nav index(2)                                                  -> [2]
    # 2 index.html: header index(self), nav a(0), sub/b(3), a#details(dup), example.org(-),
    #               mailto(-), #top(self), sub/c?lang=en(4)                       -> [0, 3, 4]
    # 3 sub/b.html: side ../index(2), c(4), breadcrumb ../index(dup), ./c#x(dup), /sub/c(dup),
    #               gr%C3%B6%C3%9Fe(5), ../a#frag(0), b.html(self)                -> [2, 4, 5, 0]
    # 4 sub/c.html: navheader b(3), ../index(2), ../ = index.html(dup), ./ (no sub/index.html),
    #               größe(5), other.test(-), navfooter b(dup)                     -> [3, 2, 5]
    # 5 größe.html: c(4), lower-case escapes of itself(self)                      -> [4]
    np.testing.assert_array_equal(tiny.offsets, [0, 3, 4, 7, 11, 14, 15])
    np.testing.assert_array_equal(tiny.links, [2, 3, 4, 2, 0, 3, 4, 2, 4, 5, 0, 3, 2, 5, 4])
    assert tiny.offsets.dtype == np.int64
    assert tiny.links.dtype == np.int32
    assert tiny.num_links == 15
    np.testing.assert_array_equal(tiny.outlinks(3), [2, 4, 5, 0])
    np.testing.assert_array_equal(tiny.outlinks(5), [4])


def test_terms_strip_chrome_and_stop_words(tiny: TopicalWeb) -> None:
    # index.html: <main> only ("a", "again" are stop words); header, nav, script and <title>
    # are gone.
    assert tiny.terms[2] == {
        "sockets": 1,
        "socket": 3,
        "speaks": 1,
        "tcp": 1,
        "outside": 1,
        "mail": 1,
        "top": 1,
        "c": 1,
    }
    # a.html: Sphinx related bar, sidebar and footer gone; non-ASCII words kept whole, CAFÉ folds.
    assert tiny.terms[0] == {
        "größe": 1,
        "naïve": 1,
        "café": 2,
        "déjà": 1,
        "vu": 1,
        "東京": 1,
        "b": 2,
        "gone": 1,
    }
    # empty.html: only a script and a nav.
    assert tiny.terms[1] == {}
    # sub/b.html: RTD side nav, breadcrumbs and footer gone ("the", "over", "a", "g" (from
    # "e.g.") are stop words).
    assert tiny.terms[3] == {
        "memory": 1,
        "pages": 2,
        "page": 1,
        "allocator": 1,
        "hands": 1,
        "c": 2,
        "abs": 1,
        "self": 1,
    }
    # sub/c.html: DocBook navheader/navfooter gone ("a", "the", "here", "g" are stop words).
    assert tiny.terms[4] == {
        "threads": 2,
        "take": 1,
        "lock": 2,
        "release": 1,
        "top": 1,
        "elsewhere": 1,
    }
    chrome_words = {"navword", "home", "relatedword", "sidebarword", "footerword", "kernelnav"}
    chrome_words |= {"breadcrumbword", "headerword", "prev", "up", "docs", "index", "words"}
    for terms in tiny.terms:
        assert not chrome_words & terms.keys()


def test_chrome_links_are_kept(tiny: TopicalWeb) -> None:
    # a.html's only link to sub/c.html sits in its sidebar; index.html's to a.html in its <nav>.
    assert 4 in tiny.outlinks(0)
    assert 0 in tiny.outlinks(2)


def test_compressed_pages_and_the_uncompressed_twin(tiny_copy: Path) -> None:
    (tiny_copy / "sub" / "d.html.gz").write_bytes(
        gzip.compress(b"<p>zipped words <a href='c.html'>c</a></p>")
    )
    # Both b.html and b.html.gz: the uncompressed one is the page.
    (tiny_copy / "sub" / "b.html.gz").write_bytes(gzip.compress(b"<p>stale</p>"))
    web = read_html_tree([(tiny_copy, BASE)])
    d = web.index_of("http://tiny.test/sub/d.html")
    assert web.num_pages == 7
    assert web.terms[d] == {"zipped": 1, "words": 1, "c": 1}
    np.testing.assert_array_equal(web.outlinks(d), [web.index_of("http://tiny.test/sub/c.html")])
    assert "stale" not in web.terms[web.index_of("http://tiny.test/sub/b.html")]


def test_links_across_roots(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "p.html").write_text('<a href="https://two.test/q.html#x">q</a> <a href="q.html">no</a>')
    (two / "q.html").write_text('<a href="https://one.test/p.html">p</a>')
    web = read_html_tree([(one, "https://one.test"), (two, "https://two.test/")])
    assert web.urls == ["https://one.test/p.html", "https://two.test/q.html"]
    np.testing.assert_array_equal(web.links, [1, 0])  # one.test/q.html does not exist


def test_bad_roots_are_refused(tmp_path: Path) -> None:
    with pytest.raises(WebFormatError, match="not a folder"):
        read_html_tree([(tmp_path / "nope", BASE)])
    with pytest.raises(WebFormatError, match="base URL"):
        read_html_tree([(TINYWEB, "ftp://tiny.test/")])
    with pytest.raises(WebFormatError, match="same URL"):
        read_html_tree([(TINYWEB, BASE), (TINYWEB, BASE)])
    with pytest.raises(WebFormatError, match="neither"):
        load_web(str(tmp_path / "nope"))
    with pytest.raises(WebFormatError, match="unknown Debian"):
        load_web("debian-docs:nope-doc")
    with pytest.raises(WebFormatError, match=r"fetch\.sh"):
        load_web("debian-docs:python3.11-doc", docs_dir=tmp_path, cache=False)


def test_cache_round_trip_equals_fresh_parse(
    tiny_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_dir = tmp_path / "webs"
    fresh = read_html_tree([(tiny_copy, "http://localhost/")])
    first = load_web(str(tiny_copy), cache_dir=cache_dir)
    _same_web(first, fresh)
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1
    assert sorted(p.name for p in entries[0].iterdir()) == [
        "graph.npz",
        "meta.json",
        "pages.jsonl.gz",
    ]

    def no_parse(*_args: object, **_kwargs: object) -> TopicalWeb:
        raise AssertionError("parsed although the cache is current")

    monkeypatch.setattr(topicalweb, "read_html_tree", no_parse)
    _same_web(load_web(str(tiny_copy), cache_dir=cache_dir), fresh)


def test_changed_file_invalidates_the_cache(tiny_copy: Path, tmp_path: Path) -> None:
    cache_dir = tmp_path / "webs"
    spec = str(tiny_copy)
    key_before = cache_key(web_roots(spec), topicalweb.STOP_WORDS)
    load_web(spec, cache_dir=cache_dir)
    page = tiny_copy / "sub" / "c.html"
    page.write_text(page.read_text(encoding="utf-8").replace("release", "unlock"), "utf-8")
    assert cache_key(web_roots(spec), topicalweb.STOP_WORDS) != key_before
    web = load_web(spec, cache_dir=cache_dir)
    c = web.index_of("http://localhost/sub/c.html")
    assert web.terms[c]["unlock"] == 1
    assert "release" not in web.terms[c]


def test_corrupt_cache_is_parsed_anew(tiny_copy: Path, tmp_path: Path) -> None:
    cache_dir = tmp_path / "webs"
    fresh = load_web(str(tiny_copy), cache_dir=cache_dir)
    (entry,) = (p for p in cache_dir.iterdir() if not p.name.startswith("."))
    (entry / "pages.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(WebFormatError):
        read_saved_web(entry)
    _same_web(load_web(str(tiny_copy), cache_dir=cache_dir), fresh)
    _same_web(read_saved_web(entry), fresh)  # and the entry was rewritten


def test_saved_web_with_wrong_counts_is_refused(tiny: TopicalWeb, tmp_path: Path) -> None:
    save_web(tiny, tmp_path / "w")
    (tmp_path / "w" / "meta.json").write_text('{"format": 1, "pages": 5, "links": 15}')
    with pytest.raises(WebFormatError, match="does not match"):
        read_saved_web(tmp_path / "w")


def test_inconsistent_web_is_refused() -> None:
    with pytest.raises(WebFormatError):
        TopicalWeb(urls=["u"], offsets=np.array([0, 2]), links=np.array([0, 1]), terms=[{}])


_DEBIAN_PAGES = {
    "linux-doc-6.1": 3185,
    "python3.11-doc": 531,  # 530 .html + whatsnew/changelog.html.gz
    "postgresql-doc-15": 1169,
    "openjdk-17-doc": 10137,
}


@pytest.mark.skipif(
    not all((debian_docs_dir() / p / ".complete").is_file() for p in DEBIAN_DOC_ROOTS),
    reason="Debian docs not fetched (infra/debian-docs/fetch.sh)",
)
def test_debian_docs_page_counts() -> None:
    # Counted when the packages were first fetched (infra/debian-docs/README.md).
    for (folder, base), (package, pages) in zip(
        web_roots("debian-docs"), _DEBIAN_PAGES.items(), strict=True
    ):
        assert base == f"https://{package}.docs.invalid/"
        assert len(page_files(folder)) == pages
