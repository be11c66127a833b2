"""`frontierflow bench --scale`: the state built in bulk, the timed log, the restart after a
kill -9 (a small version of the 100M-URL run), and the report."""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pytest

from frontierflow.pipelines.bench.engine import HOSTS
from frontierflow.pipelines.bench.scale import parse_populations
from frontierflow.pipelines.bench.scale_hold import held_files, page_in
from frontierflow.pipelines.bench.scale_state import (
    FETCHED_EVERY,
    ScaleLogSetup,
    ScaleSetup,
    build_state,
    host_keys,
    known_distance,
    scale_url,
    unfetched_count,
    unfetched_rank,
    write_scale_log,
    zipf_ranks,
)
from frontierflow.pipelines.bench.scale_worker import families, same_blocks
from frontierflow.pipelines.cli import main
from frontierflow.schemas.container import write_container
from frontierflow.state.ieca import IecaDistance, decode_ieca
from frontierflow.state.storage.codec import decode_i32, decode_u64
from frontierflow.state.storage.format import CRAWLED_FAMILY, crawled_key
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.rocksdb_options import RocksDBOptions
from frontierflow.state.storage.store import META_FAMILY
from frontierflow.state.urls import host_of


def test_a_hosts_keys_are_its_urls() -> None:
    ranks = [5, 5 + HOSTS, 5 + 1234 * HOSTS]
    assert host_keys(5, ranks) == [scale_url(r).encode() for r in ranks]
    assert host_of(scale_url(5 + HOSTS)) == "www.site5.example.org"
    assert scale_url(0) == "https://www.site0.example.org/section0/000000000000-0.html"


def test_unfetched_ranks_skip_every_fourth() -> None:
    assert FETCHED_EVERY == 4
    assert [unfetched_rank(i) for i in range(7)] == [1, 2, 3, 5, 6, 7, 9]
    assert unfetched_count(10) == 10 - 3  # ranks 0, 4, 8 were fetched


def test_built_state_holds_every_known_url(tmp_path: Path) -> None:
    urls = 2 * HOSTS + 10  # hosts of 2 and of 3 URLs
    built = build_state(tmp_path / "db", urls, RocksDBOptions(), tmp_path / "sst", 1 << 20)
    assert (built.urls, built.fetched) == (urls, (urls + 3) // 4)
    with RocksDBStore(tmp_path / "db", families()) as store:
        states = dict(store.items("ieca"))
        assert len(states) == urls
        for rank in (0, 5, urls - 1):
            cycle = 0 if rank % 4 == 0 else -1
            expected = IecaDistance(known_distance(rank), cycle)
            assert decode_ieca(states[scale_url(rank).encode()]) == expected
        crawled = dict(store.items(CRAWLED_FAMILY))
        assert set(crawled) == {scale_url(r).encode() for r in range(0, urls, 4)}
        assert {decode_i32(v) for v in crawled.values()} == {0}
        assert decode_u64(store.get(META_FAMILY, crawled_key("bench")) or b"") == built.fetched


def test_zipf_ranks_follow_the_power_law() -> None:
    """P(rank 0) = (2^0.2 − 1) / ((n+1)^0.2 − 1): the share of [1, n+1) whose
    x^0.2 − 1 falls below 2^0.2 − 1; for n = 1,000: 0.1487 / 2.982 = 0.04987."""
    ranks = zipf_ranks(np.random.default_rng(3), 400_000, 1_000)
    assert ranks.min() == 0 and ranks.max() == 999
    share = float(np.mean(ranks == 0))
    assert share == pytest.approx((2**0.2 - 1) / (1001**0.2 - 1), rel=0.03)
    assert share == pytest.approx(0.04987, rel=0.03)


def test_the_log_fetches_unfetched_pages_and_links_new_and_known_urls(tmp_path: Path) -> None:
    setup = ScaleLogSetup(events=300, outlinks=10, new_share=0.6)
    urls = 5_000
    new = write_scale_log(tmp_path / "log.avro", setup, urls)
    with (tmp_path / "log.avro").open("rb") as handle:
        events = list(fastavro.reader(handle))
    known = {scale_url(r): r for r in range(urls)}
    pages = [known[e["url"]] for e in events]
    assert all(p % 4 != 0 for p in pages) and len(set(pages)) == 300
    linked_new: set[str] = set()
    for event in events:
        links = event["outlinks"]
        fresh = [u for u in links if u not in known]
        assert len(fresh) == 6 and len(set(links)) == len(links) <= 10
        linked_new.update(fresh)
    assert new == len(linked_new)
    with pytest.raises(ValueError, match="new-share"):
        ScaleLogSetup(new_share=1.5)


def test_frontier_files_are_compared_block_by_block(tmp_path: Path) -> None:
    entry = {
        "url": "https://a.example/",
        "host": "a.example",
        "priority": 0.5,
        "strategy": "ieca",
        "crawl_id": "c",
        "cycle": 0,
        "emitted_at": 1,
    }
    files = [tmp_path / f"{i}.avro" for i in range(3)]
    for path, priority in zip(files, (0.5, 0.5, 0.25), strict=True):
        write_container(path, "FrontierEntry", [entry, {**entry, "priority": priority}])
    assert files[0].read_bytes() != files[1].read_bytes()  # each file its own sync marker
    assert same_blocks(files[0], files[1]) == (1, 0)
    assert same_blocks(files[0], files[2]) == (1, 1)


def test_populations_take_units() -> None:
    assert parse_populations(["1M", "10k", "2_000", "100m"]) == (
        1_000_000,
        10_000,
        2_000,
        100_000_000,
    )
    with pytest.raises(ValueError, match="whole numbers"):
        parse_populations(["1.5M"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"populations": (1_000,)}, "at least two URL populations"),
        ({"populations": (1_000, 1_000)}, "URL populations repeat"),
        ({"populations": (100, 1_000), "log": ScaleLogSetup(events=100)}, "--events at most 75"),
        ({"variants": ("before",)}, "--scale-variants"),
        ({"variants": ("default", "fast")}, "--scale-variants"),
        ({"log": ScaleLogSetup(events=100), "step_size": 10}, "restart needs a log"),
        ({"repeats": 0}, "--repeats must be >= 1"),
    ],
)
def test_setup_refuses_what_it_cannot_measure(fields: dict, message: str) -> None:
    base = {"populations": (10_000, 20_000), "log": ScaleLogSetup(events=2_000)}
    with pytest.raises(ValueError, match=message):
        ScaleSetup(**{**base, **fields})


def test_the_kill_falls_inside_a_commit_interval_half_way() -> None:
    """40 steps, commits every 8: the middle commit is after step 16, the kill 3 steps on."""
    setup = ScaleSetup(populations=(1_000, 2_000), log=ScaleLogSetup(events=400), step_size=10)
    assert setup.kill_at == 19


def _cells(out: str, first: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.split()[:2] == first.split())
    return line.split()[2:]


def test_scale_report_with_a_restart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Two small populations: a row each, the rate ratio as printed, and the run killed and
    restarted into the state and frontier of the uninterrupted run."""
    argv = ["bench", "--scale", "--scale-urls", "2k,20k", "--events", "400", "--step-size", "25"]
    assert main([*argv, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    small, large = _cells(out, "2,000 default"), _cells(out, "20,000 default")
    # in state after: the known URLs and the new ones 400 events × 18 links brought
    assert 2_000 + 400 * 18 * 0.8 < int(small[0].replace(",", "")) <= 2_000 + 400 * 18
    ratio = float(large[9])
    assert ratio == pytest.approx(
        float(large[2].replace(",", "")) / float(small[2].replace(",", "")), rel=0.01, abs=0.002
    )
    printed = re.search(r"^events/s at 20,000 URLs / at 2,000 \(default\): (\d+\.\d{3})", out, re.M)
    assert printed and float(printed.group(1)) == ratio
    restart = re.search(
        r"^restart at 20,000 URLs: first commit ([\d.]+) s after the start .*; state and "
        r"frontier as the uninterrupted run's: (yes|NO)$",
        out,
        re.M,
    )
    assert restart and restart.group(2) == "yes"
    rows = [line.split() for line in out.splitlines()]
    row = next(cells for cells in rows if cells[:1] == ["20,000"] and len(cells) == 8)
    keys, differ, blocks, block_differ = row[4:]
    # every key of the three families: 20,000 known URLs, the new ones, 5,000 + 400 crawled
    assert int(keys.replace(",", "")) > 20_000 + 5_400 and differ == block_differ == "0"
    assert blocks == "16"  # one container block per step


def test_held_files_are_the_sst_files_until_the_with_ends(tmp_path: Path) -> None:
    """Every SST file of the directory is held (its bytes counted), nothing else; the
    holding process is gone once the `with` ends."""
    (tmp_path / "000001.sst").write_bytes(b"a" * 8192)
    (tmp_path / "000002.sst").write_bytes(b"b" * 5000)
    (tmp_path / "000003.log").write_bytes(b"c" * 4096)
    (tmp_path / "000004.sst").write_bytes(b"")  # nothing to map
    before = set(_children())
    with held_files(tmp_path) as held:
        assert held["files"] == 2 and held["bytes"] == 8192 + 5000
        assert held["locked"] in (0, 1)
        holder = set(_children()) - before
        assert len(holder) == 1
    assert not holder & set(_children())


def test_built_files_are_paged_in_once(tmp_path: Path) -> None:
    """The SST writer leaves what it writes out of the page cache (RocksDB drops each file
    as it goes); `page_in` reads the files once, so a run finds them there."""
    build_state(tmp_path / "base", 300_000, RocksDBOptions(), tmp_path / "sst", 4 << 20)
    files = sorted((tmp_path / "base").glob("*.sst"))
    sizes = sum(f.stat().st_size for f in files)
    before = sum(_resident(f) for f in files)
    assert before < 0.5 * sizes
    (tmp_path / "base" / "000001.log.sst-not").write_bytes(b"x" * 4096)  # not an SST file
    assert page_in(tmp_path / "base") == sizes
    assert sum(_resident(f) for f in files) == sizes


def _resident(path: Path) -> int:
    """Bytes of `path` in the page cache (`mincore` over a shared mapping of it)."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    with open(path, "r+b") as file, mmap.mmap(file.fileno(), size) as mapped:
        vector = (ctypes.c_ubyte * pages)()
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector) == 0
        del address
        resident = sum(v & 1 for v in vector)
    return min(size, resident * mmap.PAGESIZE)


def _children() -> list[int]:
    own = str(os.getpid())
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == own]


def _parent(proc: Path) -> str | None:
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


def test_scale_report_with_the_files_held(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--hold-files` adds each population's default run on its state with the files held:
    a row of its own and the ratio between the populations on that row (here with the
    built files left out of the page cache, `--cold-files`)."""
    argv = ["bench", "--scale", "--scale-urls", "2k,4k", "--events", "200", "--step-size", "25"]
    extra = ["--no-restart", "--hold-files", "--cold-files", "--work-dir", str(tmp_path)]
    assert main([*argv, *extra]) == 0
    out = capsys.readouterr().out
    assert re.search(r"pending MB\s+disk MB$", out, re.M)
    small, large = _cells(out, "2,000 default-files-held"), _cells(out, "4,000 default-files-held")
    assert small[9] == "1.000"
    ratio = float(large[2].replace(",", "")) / float(small[2].replace(",", ""))
    assert float(large[9]) == pytest.approx(ratio, rel=0.01, abs=0.002)
    printed = re.search(
        r"^the same with the state's files held in memory \(default-files-held: [\d.]+ GB in "
        r"(\d+) files at 4,000 URLs, [^)]+\): (\d\.\d{3}), per CPU second \d\.\d{3}$",
        out,
        re.M,
    )
    assert printed and int(printed.group(1)) >= 2 and float(printed.group(2)) == float(large[9])


@pytest.mark.kafka
def test_scale_live_job_writes_the_replays_frontier(
    kafka_broker: Any, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """With a broker, the live job runs on each population over the same state and log:
    it writes the replay's frontier entries and a tombstone for each page fetched (200
    events, each fetching a page of its own)."""
    argv = ["bench", "--scale", "--scale-urls", "2k,4k", "--events", "200", "--step-size", "25"]
    live = ["--no-restart", "--live-bootstrap", kafka_broker.bootstrap]
    assert main([*argv, *live, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {
        cells[0]: cells
        for cells in (line.split() for line in out.split("\nlive: ", 1)[1].splitlines())
        if cells[:1] in (["2,000"], ["4,000"])
    }
    assert set(rows) == {"2,000", "4,000"}
    for cells in rows.values():
        records_out, replay_out = (int(c.replace(",", "")) for c in cells[2:4])
        assert replay_out > 200 and records_out == replay_out + 200
    assert rows["2,000"][6] == "1.000"  # the smallest population against itself


def test_scale_report_with_rounds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--repeats 3`: each variant's replays in three rounds, the second with the largest
    population first; each round's ratio as its rates give it, and the verdict on the
    default's median."""
    argv = ["bench", "--scale", "--scale-urls", "2k,4k", "--events", "200", "--step-size", "25"]
    extra = ["--no-restart", "--repeats", "3", "--scale-variants", "default,lz4"]
    assert main([*argv, *extra, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    medians = {}
    for variant in ("default", "lz4"):
        block = out.split(f"\n{variant}:\n", 1)[1]
        rows = [
            ln.split()
            for ln in block.splitlines()[:4]
            if re.match(r"^\s+[123]\s+(smallest|largest)", ln)
        ]
        assert [r[:2] for r in rows] == [["1", "smallest"], ["2", "largest"], ["3", "smallest"]]
        assert rows[0][3] == _cells(out, f"4,000 {variant}")[2]  # the first round: the table's
        ratios = []
        for row in rows:
            small, large = float(row[2].replace(",", "")), float(row[3].replace(",", ""))
            ratios.append(float(row[5]))
            assert ratios[-1] == pytest.approx(large / small, rel=0.01, abs=0.002)
        medians[variant] = sorted(ratios)[1]
        printed = re.search(
            rf"^{variant}: median over 3 rounds: ratio (\d\.\d{{3}}), per CPU second", out, re.M
        )
        assert printed and float(printed.group(1)) == medians[variant]
    verdict = re.search(
        r"^events/s at 4,000 URLs / at 2,000 \(default, the median of 3 rounds' ratios\): "
        r"(\d\.\d{3})",
        out,
        re.M,
    )
    assert verdict and float(verdict.group(1)) == medians["default"]
    assert not list(tmp_path.iterdir())  # the work directory's copies are gone


def test_a_workers_peak_rss_is_its_own() -> None:
    """A worker started by a process holding 512 MiB reports its own peak, not its
    parent's: Linux keeps in `ru_maxrss`, across the exec, the peak of the address space
    the worker was started from (Python's `subprocess` starts it from a vfork)."""
    held = bytearray(512 * 2**20)
    held[:: 2**12] = b"\x01" * (len(held) >> 12)  # every page touched, so resident
    code = (
        "import resource; from frontierflow.pipelines.bench.engine import peak_rss_mib; "
        "print(peak_rss_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, maxrss = map(float, done.stdout.split())
    assert 10 < own < 256
    assert own <= maxrss  # the parent's peak, where the kernel carries it over
    del held
