"""WARC files as a source: records written here with warcio's writer (and the broken ones a
writer refuses to write, by hand), every record's item worked out by hand."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from frontierflow.connectors.base import Failed
from frontierflow.connectors.logs import read_fetch_events
from frontierflow.connectors.warc import WarcOptions, warc_items
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.schemas.container import log_format, read_container
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.storage.rocksdb import RocksDBStore

DATE = "2026-01-02T03:04:05Z"
DATE_MS = 1_767_323_045_000  # 2026-01-02 03:04:05 UTC: 20455 days · 86400 s + 11045 s

INDEX_HTML = (
    b"<html><head><title>t</title></head><body><nav><a href='a.html'>sockets nav</a></nav>"
    b"<p>Sockets and TCP sockets.</p><a href='b.html#part'>b</a> <a href='mailto:x@y.z'>m</a>"
    b" <a href='#top'>top</a> <a href='https://other.test/x?q=1#y'>o</a></body></html>"
)
A_HTML = b"<html><body><a href='/'>home</a><a href='c.html?q=1'>c</a> port</body></html>"
D_HTML = b"<html><body><a href='sub/e.html'>e</a> the end</body></html>"


def _http(status: str, content_type: str | None, extra: list[tuple[str, str]] = ()) -> Any:
    headers = [("Content-Type", content_type)] if content_type else []
    return StatusAndHeaders(status, headers + list(extra), protocol="HTTP/1.1")


def _response(w: WARCWriter, url: str, body: bytes, http: Any, **warc: str) -> Any:
    record = w.create_warc_record(
        url,
        "response",
        payload=io.BytesIO(body),
        http_headers=http,
        warc_headers_dict={"WARC-Date": DATE, **warc},
    )
    w.write_record(record)
    return record


def write_test_warc(path: Path) -> None:
    """Thirteen records, one gzip member each (see the test below for what each becomes)."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    w.write_record(w.create_warcinfo_record(path.name, {"software": "tests"}))  # 0
    request = w.create_warc_record(  # 1
        "http://site.test/",
        "request",
        payload=io.BytesIO(b""),
        http_headers=StatusAndHeaders(
            "GET / HTTP/1.1", [("Host", "site.test")], is_http_request=True
        ),
        warc_headers_dict={"WARC-Date": DATE},
    )
    w.write_record(request)
    request_id = request.rec_headers.get_header("WARC-Record-ID")
    index = _response(  # 2
        w,
        "http://site.test/",
        INDEX_HTML,
        _http("200 OK", "text/html; charset=utf-8"),
        **{"WARC-Concurrent-To": request_id},
    )
    request_a = w.create_warc_record(  # 3
        "http://site.test/a.html",
        "request",
        payload=io.BytesIO(b""),
        http_headers=StatusAndHeaders(
            "GET /a.html HTTP/1.1", [("Referer", "http://site.test/")], is_http_request=True
        ),
        warc_headers_dict={"WARC-Date": DATE},
    )
    w.write_record(request_a)
    _response(  # 4
        w,
        "http://site.test/a.html",
        A_HTML,
        _http("200 OK", "text/html"),
        **{"WARC-Concurrent-To": request_a.rec_headers.get_header("WARC-Record-ID")},
    )
    _response(w, "http://site.test/img.png", b"\x89PNG....", _http("200 OK", "image/png"))  # 5
    digest = index.rec_headers.get_header("WARC-Payload-Digest")
    revisit = w.create_revisit_record(  # 6
        "http://site.test/copy.html",
        digest,
        "http://site.test/",
        DATE,
        http_headers=_http("200 OK", "text/html"),
        warc_headers_dict={"WARC-Date": DATE},
    )
    w.write_record(revisit)
    orphan = w.create_revisit_record(  # 7
        "http://site.test/gone.html",
        "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "http://elsewhere.test/",
        DATE,
        http_headers=_http("200 OK", "text/html"),
        warc_headers_dict={"WARC-Date": DATE},
    )
    w.write_record(orphan)
    scratch = io.BytesIO()
    _response(
        WARCWriter(scratch, gzip=False),
        "http://site.test/cut.html",
        A_HTML * 4,
        _http("200 OK", "text/html"),
    )
    plain_cut = scratch.getvalue()
    buf.write(gzip.compress(plain_cut[: len(plain_cut) // 2]))  # 8: truncated record
    broken = bytearray(gzip.compress(plain_cut))
    for i in range(20, 40):
        broken[i] ^= 0x5A
    buf.write(bytes(broken))  # 9: corrupt gzip member
    _response(  # 10
        w,
        "http://site.test/old.html",
        b"",
        _http("301 Moved Permanently", None, [("Location", "/a.html")]),
    )
    bad_head = b"NOT HTTP AT ALL\r\n\r\nbody"
    buf.write(  # 11: unparsable HTTP headers, written by hand (a writer refuses)
        gzip.compress(
            b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:1>\r\n"
            b"WARC-Target-URI: http://site.test/bad.html\r\nWARC-Date: " + DATE.encode() + b"\r\n"
            b"Content-Type: application/http; msgtype=response\r\n"
            b"Content-Length: " + str(len(bad_head)).encode() + b"\r\n\r\n" + bad_head + b"\r\n\r\n"
        )
    )
    _response(w, "http://site.test/d.html", D_HTML, _http("200 OK", "text/html"))  # 12
    path.write_bytes(buf.getvalue())


@pytest.fixture
def test_warc(tmp_path: Path) -> Path:
    path = tmp_path / "crawl.warc.gz"
    write_test_warc(path)
    return path


def _event(url: str, outlinks: tuple[str, ...], terms: dict[str, int] | None, **kw: Any) -> dict:
    return {"url": url, "outlinks": outlinks, "terms": terms, **kw}


def test_every_record_becomes_an_event_a_dead_letter_or_nothing(test_warc: Path) -> None:
    items = list(read_fetch_events(test_warc))
    by_index = {position.offset: item for position, item, _ in items}
    # 0 warcinfo, 1 and 3 requests: no item, but their indexes are taken
    assert sorted(by_index) == [2, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    index = by_index[2]
    assert isinstance(index, FetchEvent)
    # links in document order, fragments cut, query kept, mailto: and "#top" (the page
    # itself, fragment cut) as a fetcher would see them; the nav link is kept as a link
    assert index.outlinks == (
        "http://site.test/a.html",
        "http://site.test/b.html",
        "http://site.test/",
        "https://other.test/x?q=1",
    )
    # the title is not body text and the nav's words are chrome; stop words ("and") are left out
    assert index.terms == {"sockets": 2, "tcp": 1, "b": 1, "m": 1, "top": 1, "o": 1}
    assert (index.fetched_at, index.status, index.host, index.via) == (
        DATE_MS,
        200,
        "site.test",
        None,
    )
    assert (index.bytes, index.fetch_ms, index.echo, index.fetcher_id) == (
        len(INDEX_HTML),
        0.0,
        {},
        "crawl.warc.gz",
    )
    a = by_index[4]
    assert isinstance(a, FetchEvent)
    assert a.via == "http://site.test/"  # the Referer of its request record
    assert a.outlinks == ("http://site.test/", "http://site.test/c.html?q=1")
    assert a.terms == {"home": 1, "c": 1, "port": 1}
    copy = by_index[6]
    assert isinstance(copy, FetchEvent)
    assert copy.url == "http://site.test/copy.html"
    # the original's links, resolved against the revisit's own URL ("#top" is the page itself)
    assert copy.outlinks == (
        "http://site.test/a.html",
        "http://site.test/b.html",
        "http://site.test/copy.html",
        "https://other.test/x?q=1",
    )
    assert copy.terms == index.terms
    assert copy.content_hash == index.content_hash
    redirect = by_index[10]
    assert isinstance(redirect, FetchEvent)
    assert (redirect.status, redirect.outlinks, redirect.terms) == (
        301,
        ("http://site.test/a.html",),
        None,
    )
    d = by_index[12]
    assert isinstance(d, FetchEvent) and d.outlinks == ("http://site.test/sub/e.html",)
    failures = {
        i: (item.error_class, item.message)
        for i, item in by_index.items()
        if isinstance(item, Failed)
    }
    assert {i: kind for i, (kind, _) in failures.items()} == {
        5: "NotHtml",
        7: "RevisitWithoutOriginal",
        8: "TruncatedRecord",
        9: "CorruptGzipMember",
        11: "BadHttpHeaders",
    }
    assert "image/png" in failures[5][1]
    assert "gone.html" in failures[7][1]
    raws = {position.offset: raw for position, _, raw in items}
    assert raws[5].startswith(b"WARC/1.0") and b"image/png" in raws[5]  # the record kept


def test_reading_from_any_index_gives_the_same_items(test_warc: Path) -> None:
    """A resumed replay reads on from the committed index: what it sees from index k on is
    what a full read saw there, also for a response whose request came before k."""
    full = [(p.offset, repr(item)) for p, item, _ in read_fetch_events(test_warc)]
    for start in range(14):
        resumed = [(p.offset, repr(item)) for p, item, _ in read_fetch_events(test_warc, start)]
        assert resumed == [row for row in full if row[0] >= start]


def test_plain_warc_and_detection(tmp_path: Path) -> None:
    """An uncompressed WARC with a last record cut short: the records before it, then one
    truncation; magic bytes are read whatever the name says."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=False)
    _response(w, "http://site.test/d.html", D_HTML, _http("200 OK", "text/html"))
    whole = buf.getvalue()
    _response(w, "http://site.test/a.html", A_HTML, _http("200 OK", "text/html"))
    data = buf.getvalue()[: len(whole) + 200]
    path = tmp_path / "crawl.log"  # no WARC name: found by its first bytes
    path.write_bytes(data)
    assert log_format(data[:512], path.name) == "warc"
    items = list(read_fetch_events(path))
    assert [p.offset for p, _, _ in items] == [0, 1]
    assert isinstance(items[0][1], FetchEvent) and items[0][1].url == "http://site.test/d.html"
    assert isinstance(items[1][1], Failed) and items[1][1].error_class == "TruncatedRecord"


def test_arc_gz(tmp_path: Path) -> None:
    """An ARC file (version 1, as Heritrix and the Internet Archive wrote them)."""
    version = b"1 0 tests\nURL IP-address Archive-date Content-type Archive-length\n"
    head = b"filedesc://crawl.arc 0.0.0.0 20260102030405 text/plain %d\n" % len(version)
    body = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + A_HTML
    record = b"http://site.test/a.html 10.0.0.1 20260102030405 text/html %d\n" % len(body)
    path = tmp_path / "crawl.arc.gz"
    path.write_bytes(gzip.compress(head + version + b"\n") + gzip.compress(record + body + b"\n"))
    items = list(read_fetch_events(path))
    assert len(items) == 1
    position, event, _ = items[0]
    assert position.offset == 1 and isinstance(event, FetchEvent)
    assert (event.url, event.fetched_at, event.status) == ("http://site.test/a.html", DATE_MS, 200)
    assert event.outlinks == ("http://site.test/", "http://site.test/c.html?q=1")


def test_warc_to_events_writes_a_log_that_replays_the_same(test_warc: Path, tmp_path: Path) -> None:
    out = tmp_path / "events.avro"
    args = ["warc-to-events", str(test_warc), str(out), "--fetcher-id", "wget-1"]
    assert main(args) == 0
    records = list(read_container(out, "FetchEvent"))
    assert [r["url"] for r in records] == [
        "http://site.test/",
        "http://site.test/a.html",
        "http://site.test/copy.html",
        "http://site.test/old.html",
        "http://site.test/d.html",
    ]
    assert {(r["fetcher_id"], r["crawl_id"]) for r in records} == {("wget-1", "default")}
    dead = [json.loads(line) for line in Path(f"{out}.dead-letters.jsonl").read_text().splitlines()]
    assert [(d["offset"], d["error_class"]) for d in dead] == [
        (5, "NotHtml"),
        (7, "RevisitWithoutOriginal"),
        (8, "TruncatedRecord"),
        (9, "CorruptGzipMember"),
        (11, "BadHttpHeaders"),
    ]
    # the same frontier from the WARC and from the Avro log, echoes filled from state (always
    # for a WARC, on request for a log); without the fill, a.html (reached from the index
    # page) would count as a starting page
    frontier = {}
    for log, name, flags in (
        (test_warc, "warc", []),
        (out, "avro", ["--echo-from-state"]),
        (out, "unfilled", []),
    ):
        target = tmp_path / f"{name}.jsonl"
        argv = ["replay", str(log), "--state-dir", str(tmp_path / name), "--out", str(target)]
        assert main([*argv, *flags]) == 0
        frontier[name] = target.read_text()
    assert frontier["warc"] == frontier["avro"] != frontier["unfilled"]
    assert "http://site.test/c.html?q=1" in frontier["warc"]


def test_a_record_larger_than_the_limit_is_a_dead_letter(test_warc: Path) -> None:
    with test_warc.open("rb") as handle:
        items = list(warc_items(handle, "x", options=WarcOptions(max_record_bytes=400)))
    kinds = {p.offset: i.error_class for p, i, _ in items if isinstance(i, Failed)}
    assert kinds[2] == "RecordTooLarge"  # the index page inflates to more than 400 bytes
    assert kinds[9] == "CorruptGzipMember"


def test_a_record_larger_than_a_read_chunk_then_the_next(tmp_path: Path) -> None:
    """A member that inflates past the 1 MiB output bound of one inflate call, then another:
    both read, the second at its own offset."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    big = b"<html><body>" + b"<p>tcp</p>" * 200_000 + b"<a href='x.html'>x</a></body></html>"
    _response(w, "http://site.test/big.html", big, _http("200 OK", "text/html"))
    _response(w, "http://site.test/d.html", D_HTML, _http("200 OK", "text/html"))
    path = tmp_path / "big.warc.gz"
    path.write_bytes(buf.getvalue())
    items = list(read_fetch_events(path))
    assert [(p.offset, type(i).__name__) for p, i, _ in items] == [
        (0, "FetchEvent"),
        (1, "FetchEvent"),
    ]
    first, second = items[0][1], items[1][1]
    assert isinstance(first, FetchEvent) and isinstance(second, FetchEvent)
    assert first.terms == {"tcp": 200_000, "x": 1} and first.bytes == len(big)
    assert second.url == "http://site.test/d.html"


def test_a_dns_record_is_no_fetch(tmp_path: Path) -> None:
    """Heritrix logs its DNS lookups as response records of `dns:` URIs: they yield nothing."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    dns = w.create_warc_record(
        "dns:site.test",
        "response",
        payload=io.BytesIO(b"20260102030405\nsite.test. 300 IN A 10.0.0.1\n"),
        warc_content_type="text/dns",
        warc_headers_dict={"WARC-Date": DATE},
    )
    w.write_record(dns)
    _response(w, "http://site.test/d.html", D_HTML, _http("200 OK", "text/html"))
    path = tmp_path / "heritrix.warc.gz"
    path.write_bytes(buf.getvalue())
    items = list(read_fetch_events(path))
    assert [(p.offset, getattr(i, "url", None)) for p, i, _ in items] == [
        (1, "http://site.test/d.html")
    ]


class _Crash(Exception):
    pass


@pytest.mark.parametrize(
    ("phase", "nth", "commit_every"),
    [("flushed", 2, 1), ("committed", 3, 1), ("flushing", 4, 1), ("flushed", 3, 2)],
)
def test_a_crashed_warc_replay_resumes_exactly(
    test_warc: Path, tmp_path: Path, phase: str, nth: int, commit_every: int
) -> None:
    """A replay stopped at a commit phase of its nth step (two records a step; a commit
    every step, or every two), then run again, ends with the files and state of an
    uninterrupted run."""

    def run(state: Path, out: Path, crash_at: int | None, every: int = 8) -> None:
        seen = 0

        def before_commit(at: str) -> None:
            nonlocal seen
            if at == phase:
                seen += 1
                if seen == crash_at:
                    raise _Crash(at)

        replay_log(
            test_warc,
            strategy_name="ieca",
            state_dir=state,
            out=out,
            step_size=2,
            before_commit=before_commit,
            fill_echo=True,
            commit_every=every,
        )

    run(tmp_path / "ref", tmp_path / "ref.jsonl", None)
    with pytest.raises(_Crash):
        run(tmp_path / "st", tmp_path / "out.jsonl", nth, commit_every)
    run(tmp_path / "st", tmp_path / "out.jsonl", None)
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    dead = "out.jsonl.dead-letters.jsonl"
    assert (tmp_path / dead).read_bytes() == (
        tmp_path / "ref.jsonl.dead-letters.jsonl"
    ).read_bytes()
    families = ("ieca", "crawled", "meta")
    with (
        RocksDBStore(tmp_path / "ref", families) as a,
        RocksDBStore(tmp_path / "st", families) as b,
    ):
        assert dict(a.items("ieca")) == dict(b.items("ieca"))
        assert dict(a.items("crawled")) == dict(b.items("crawled"))
    assert len((tmp_path / "ref.jsonl").read_text().splitlines()) > 5


def test_the_windowed_beam_form_refuses_a_warc(test_warc: Path, tmp_path: Path) -> None:
    """A WARC's echoes come from state, which only the embedded engine and the bounded Beam
    replay derive: the unbounded form says so before any pipeline runs."""
    argv = ["replay", str(test_warc), "--runner", "beam", "--clock", "windowed:1000"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert not list(tmp_path.glob("out*"))
