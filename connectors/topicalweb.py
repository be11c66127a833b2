"""A folder of HTML pages read as a recorded web with topics, for focused-crawl simulation.

`read_html_tree` turns HTML trees (each served under a base URL, their pages read by
`frontierflow.connectors.htmlpages`) into a `TopicalWeb`: page URLs, the internal link graph
in CSR form and each page's term counts. `load_web` reads a folder or Debian's documentation
packages (`frontierflow.connectors.debiandocs`) and caches the parse. The LAFC simulator
(Akbari Torkestani 2012) crawls this web and judges pages with `frontierflow.state.relevance`.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from frontierflow.connectors.debiandocs import DEBIAN_DOC_ROOTS, debian_doc_base, debian_docs_dir
from frontierflow.connectors.htmlpages import (
    LinkResolver,
    normalise_url,
    page_files,
    parse_page,
    read_page,
)
from frontierflow.state.relevance import (
    STOP_WORDS,
    TOPICS,
    Judge,
    similarity,
    term_counts,
)

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
PageArray = npt.NDArray[np.int32]

#: Bump when the parse or the cache layout changes: old caches are then ignored.
FORMAT_VERSION = 1


class WebFormatError(ValueError):
    """A web's folders or cache are missing, inconsistent or unreadable."""


# --------------------------------------------------------------------------------------------
# The in-memory web
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TopicalWeb:
    """Pages with URLs, internal links (CSR) and term counts.

    Page i's outlinks are `links[offsets[i]:offsets[i+1]]`: page indices in document order,
    each target once (its first occurrence), links to the page itself left out (a crawler
    never refetches the page it is on), only links that land on a page of this web.
    """

    urls: list[str]
    offsets: IntArray
    links: PageArray
    terms: list[dict[str, int]]
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        links = np.ascontiguousarray(self.links, dtype=np.int32)
        n = len(self.urls)
        if offsets.shape != (n + 1,) or len(self.terms) != n:
            raise WebFormatError(f"{n} urls need {n + 1} offsets and {n} term maps")
        if offsets[0] != 0 or offsets[-1] != links.size or np.any(np.diff(offsets) < 0):
            raise WebFormatError("offsets must start at 0, never decrease and end at len(links)")
        if links.size and (links.min() < 0 or links.max() >= n):
            raise WebFormatError(f"links must be page indices in [0, {n})")
        index = {url: i for i, url in enumerate(self.urls)}
        if len(index) != n:
            raise WebFormatError("page URLs must be distinct")
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "links", links)
        object.__setattr__(self, "_index", index)

    @property
    def num_pages(self) -> int:
        """Number of pages."""
        return len(self.urls)

    @property
    def num_links(self) -> int:
        """Number of internal links (distinct per page, no self-links)."""
        return int(self.links.size)

    def outlinks(self, i: int) -> PageArray:
        """Page i's outlinks as page indices, in document order (a view, do not modify)."""
        return self.links[self.offsets[i] : self.offsets[i + 1]]

    def index_of(self, url: str) -> int:
        """The page index of `url` (its fragment ignored); KeyError if it is not in the web."""
        return self._index[normalise_url(url)]


# --------------------------------------------------------------------------------------------
# Reading HTML trees into a web
# --------------------------------------------------------------------------------------------


def _check_base(base: str) -> str:
    """An http(s) base URL with a trailing slash, so relative paths join under it."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WebFormatError(f"base URL must be http(s)://host/..., got {base!r}")
    if parts.query or parts.fragment:
        raise WebFormatError(f"base URL must have no query or fragment: {base!r}")
    return base if base.endswith("/") else base + "/"


def read_html_tree(
    roots: Sequence[tuple[Path, str]], stop_words: frozenset[str] = STOP_WORDS
) -> TopicalWeb:
    """Reads every page under each (folder, base URL) into one web.

    A page's URL is its base URL + its path relative to the folder; pages are numbered root by
    root, sorted by path within a root. Links are resolved against the page URL (urljoin),
    lose their query and fragment, and are kept only when they land on a page of the web, which
    may be under another root. Raises WebFormatError for a missing folder, a bad base URL or
    two files that would be served at the same URL.
    """
    files: list[tuple[str, Path]] = []
    for folder, base in roots:
        folder = Path(folder)
        if not folder.is_dir():
            raise WebFormatError(f"not a folder: {folder}")
        base = _check_base(base)
        files.extend((normalise_url(base + rel), path) for rel, path in page_files(folder))
    urls = [url for url, _ in files]
    index = {url: i for i, url in enumerate(urls)}
    if len(index) != len(urls):
        raise WebFormatError("two pages map to the same URL: give each root its own base URL")

    resolver = LinkResolver(index)
    offsets = np.zeros(len(urls) + 1, dtype=np.int64)
    chunks: list[list[int]] = []
    terms: list[dict[str, int]] = []
    for i, (url, path) in enumerate(files):
        try:
            hrefs, text = parse_page(read_page(path))
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            # An unreadable page stays in the web (others link to it) with no text or links.
            logger.warning("unreadable page %s: %s", path, exc)
            hrefs, text = [], ""
        targets = resolver.targets(i, url, hrefs)
        chunks.append(targets)
        offsets[i + 1] = offsets[i] + len(targets)
        terms.append(term_counts(text, stop_words))
    links = np.fromiter((t for chunk in chunks for t in chunk), dtype=np.int32, count=offsets[-1])
    return TopicalWeb(urls=urls, offsets=offsets, links=links, terms=terms)


# --------------------------------------------------------------------------------------------
# Named webs and the parse cache
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Where parsed webs are cached: ~/.cache/frontierflow/webs."""
    return Path.home() / ".cache" / "frontierflow" / "webs"


def web_roots(spec: str, docs_dir: Path | None = None) -> list[tuple[Path, str]]:
    """The (folder, base URL) roots a web spec names.

    "debian-docs" is the four packages of infra/debian-docs, "debian-docs:a,b" some of them;
    anything else is a folder served under http://localhost/.
    """
    name, _, rest = spec.partition(":")
    if name != "debian-docs":
        folder = Path(spec).expanduser()
        if not folder.is_dir():
            raise WebFormatError(
                f"web spec {spec!r} is neither 'debian-docs[:pkg,...]' nor a folder"
            )
        return [(folder.resolve(), "http://localhost/")]
    packages = [p.strip() for p in rest.split(",") if p.strip()] if rest else list(DEBIAN_DOC_ROOTS)
    unknown = [p for p in packages if p not in DEBIAN_DOC_ROOTS]
    if unknown or not packages:
        raise WebFormatError(
            f"unknown Debian documentation package(s) {unknown}; known: {list(DEBIAN_DOC_ROOTS)}"
        )
    base_dir = docs_dir if docs_dir is not None else debian_docs_dir()
    roots = []
    for package in packages:
        folder = base_dir / package / DEBIAN_DOC_ROOTS[package]
        if not folder.is_dir():
            raise WebFormatError(
                f"{folder} is missing: run infra/debian-docs/fetch.sh {package} first"
            )
        roots.append((folder, debian_doc_base(package)))
    return roots


def cache_key(roots: Sequence[tuple[Path, str]], stop_words: frozenset[str]) -> str:
    """A digest of everything the parse depends on: format version, roots, stop words, and
    every page file's path, size and mtime (so editing, adding or removing a page misses)."""
    h = hashlib.sha256()
    h.update(json.dumps([FORMAT_VERSION, sorted(stop_words)]).encode())
    for folder, base in roots:
        folder = Path(folder).resolve()
        h.update(json.dumps([str(folder), base]).encode())
        for rel, path in page_files(folder):
            st = path.stat()
            h.update(f"\n{rel}\t{st.st_size}\t{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def save_web(web: TopicalWeb, folder: Path) -> None:
    """Writes the web in the cache format (no pickle; readable from any language):

    - graph.npz: `offsets` (int64) and `links` (int32), the CSR arrays;
    - pages.jsonl.gz: one JSON object per page, in index order: {"url": ..., "terms": {...}};
    - meta.json: format version and counts, written last as the "complete" marker.
    """
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "graph.npz", offsets=web.offsets, links=web.links)
    with gzip.open(folder / "pages.jsonl.gz", "wt", encoding="utf-8", compresslevel=3) as out:
        for url, terms in zip(web.urls, web.terms, strict=True):
            out.write(json.dumps({"url": url, "terms": terms}, ensure_ascii=False) + "\n")
    meta = {"format": FORMAT_VERSION, "pages": web.num_pages, "links": web.num_links}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def read_saved_web(folder: Path) -> TopicalWeb:
    """Reads a web written by `save_web`; WebFormatError if it is incomplete or corrupt."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise WebFormatError(f"cache format {meta.get('format')} != {FORMAT_VERSION}")
        with np.load(folder / "graph.npz", allow_pickle=False) as graph:
            offsets, links = graph["offsets"], graph["links"]
        urls: list[str] = []
        terms: list[dict[str, int]] = []
        with gzip.open(folder / "pages.jsonl.gz", "rt", encoding="utf-8") as lines:
            for line in lines:
                page = json.loads(line)
                urls.append(page["url"])
                terms.append(page["terms"])
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise WebFormatError(f"unreadable web cache {folder}: {exc}") from exc
    if len(urls) != meta.get("pages") or int(links.size) != meta.get("links"):
        raise WebFormatError(f"web cache {folder} does not match its meta.json")
    return TopicalWeb(urls=urls, offsets=offsets, links=links, terms=terms)


def load_web(
    spec: str,
    *,
    cache: bool = True,
    cache_dir: Path | None = None,
    docs_dir: Path | None = None,
    stop_words: frozenset[str] = STOP_WORDS,
) -> TopicalWeb:
    """Reads the web `spec` names (see `web_roots`), from the parse cache when it is current.

    The cache folder is <cache_dir>/<cache_key>/; a stale or corrupt entry is parsed anew
    and replaced. Writing goes through a scratch folder renamed into place, so a killed run
    or two concurrent ones never leave a half-written entry that a later run would trust.
    """
    roots = web_roots(spec, docs_dir)
    if not cache:
        return read_html_tree(roots, stop_words)
    folder = Path(cache_dir or default_cache_dir()) / cache_key(roots, stop_words)
    if (folder / "meta.json").is_file():
        try:
            return read_saved_web(folder)
        except WebFormatError as exc:
            logger.warning("re-parsing %s: %s", spec, exc)
    web = read_html_tree(roots, stop_words)
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        save_web(web, scratch)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(scratch, folder)
    except OSError as exc:  # e.g. another process renamed its copy in first
        logger.warning("could not cache web %s in %s: %s", spec, folder, exc)
        shutil.rmtree(scratch, ignore_errors=True)
    return web


# --------------------------------------------------------------------------------------------
# Benchmark / report command
# --------------------------------------------------------------------------------------------


def _host(url: str) -> str:
    return urlsplit(url).netloc


def main(argv: Sequence[str] | None = None) -> int:
    """Prints a web's pages and links per host, the load time, and relevant pages per topic."""
    parser = argparse.ArgumentParser(
        prog="python -m frontierflow.connectors.topicalweb", description=main.__doc__
    )
    parser.add_argument("spec", nargs="?", default="debian-docs")
    parser.add_argument("--no-cache", action="store_true", help="parse even if cached")
    parser.add_argument("--examples", type=int, default=3, help="example URLs per topic")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    start = time.perf_counter()
    web = load_web(args.spec, cache=not args.no_cache)
    seconds = time.perf_counter() - start
    print(f"loaded {args.spec}: {web.num_pages} pages, {web.num_links} links in {seconds:.1f} s")
    hosts = [_host(u) for u in web.urls]
    per_host: dict[str, list[int]] = {}
    for i, host in enumerate(hosts):
        entry = per_host.setdefault(host, [0, 0])
        entry[0] += 1
        entry[1] += int(web.offsets[i + 1] - web.offsets[i])
    print("| host | pages | internal links |\n|---|---|---|")
    for host, (pages, links) in per_host.items():
        print(f"| {host} | {pages} | {links} |")

    judges = {
        "sim>=0.75 (the paper's)": Judge(0.75),
        "sim>=0.75 & >=5 kw": Judge(0.75, min_occurrences=5),
        "sim>=0.5": Judge(0.5),
        "sim>=0.5 & >=5 kw": Judge(0.5, min_occurrences=5),
    }
    print("\n| topic | keywords | " + " | ".join(judges) + " |")
    print("|---|---|" + "---|" * len(judges))
    examples: dict[str, list[tuple[float, str]]] = {}
    for name, topic in TOPICS.items():
        counts = [sum(judge.relevant(topic, t) for t in web.terms) for judge in judges.values()]
        ranked = sorted(
            (
                (similarity(topic, t), web.urls[i])
                for i, t in enumerate(web.terms)
                if PAPER_JUDGE.relevant(topic, t)
            ),
            reverse=True,
        )
        # The best pages, then evenly spaced ones down to the threshold.
        step = max(1, len(ranked) // max(1, args.examples))
        examples[name] = ranked[:2] + ranked[step::step][: args.examples]
        weights = " ".join(f"{k}:{w:g}" if w != 1 else k for k, w in topic.weights.items())
        print(f"| {name} | {weights} | " + " | ".join(map(str, counts)) + " |")
    for name, chosen in examples.items():
        print(f"\n{name}:")
        for sim, url in chosen:
            print(f"  {sim:.2f} {url}")
    return 0


PAPER_JUDGE = Judge()


if __name__ == "__main__":
    sys.exit(main())
