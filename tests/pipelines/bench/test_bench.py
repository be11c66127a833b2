"""The benchmarks run end to end on small logs and print figures whose relations hold (speed
targets are measured by the commands themselves, not asserted here); the log generator
draws what `numpy.random.Generator.choice` would; `bench beam` finds cached runners."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest

from frontierflow.connectors.graphfiles import read_graph
from frontierflow.connectors.webgraph import node_url
from frontierflow.pipelines.bench.baselines import pass_through, raw_ceiling
from frontierflow.pipelines.bench.beam import (
    beam_args,
    cached_flink_job_server,
    cached_prism,
    find_runner,
    run_beam_bench,
)
from frontierflow.pipelines.bench.engine import (
    FIRST_FETCH_MS,
    JOB_RUN,
    BenchSetup,
    LinkPopularity,
    bench_url,
    generate_log,
    generated_events,
    spawn_bench_worker,
)
from frontierflow.pipelines.bench.graph_log import breadth_first, write_graph_log
from frontierflow.pipelines.cli import main
from frontierflow.schemas.container import read_container


def _cells(out: str, name: str) -> list[str]:
    """The cells after `name` on the report line that starts with it."""
    lines = [line for line in out.splitlines() if line.strip().startswith(name + " ")]
    assert len(lines) == 1, f"no single row {name!r} in:\n{out}"
    return lines[0].strip()[len(name) :].split()


def _figures(cells: list[str]) -> list[float]:
    return [float("nan") if c == "-" else float(c.replace(",", "")) for c in cells]


def test_bench_rows_agree_with_the_log(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """200 events with 30 distinct outlinks each: the ceiling and the pass-through both
    write 200 × 30 = 6,000 entries; IECA writes one per changed link, at most as many; each
    row's events/s is 200 over its seconds, and its ratio that over the ceiling's."""
    argv = ["bench", "--events", "200", "--urls", "3000", "--repeats", "1", "--step-size", "50"]
    assert main([*argv, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^log: 200 FetchEvents, 30 outlinks each, 3,000 URLs", out, re.M)
    rows = {
        name: _figures(_cells(out, name))
        for name in ("raw fastavro", "pass-through", "ieca+rocksdb")
    }
    # events, events/s, entries, link updates/s, seconds, CPU s, peak RSS MiB, vs ceiling,
    # vs ceiling per CPU second
    assert all(len(r) == 9 for r in rows.values())
    raw, passed, ieca = rows["raw fastavro"], rows["pass-through"], rows["ieca+rocksdb"]
    assert raw[0] == passed[0] == ieca[0] == 200
    assert raw[2] == passed[2] == 6_000
    assert 0 < ieca[2] <= 6_000
    assert raw[7] == raw[8] == 1.0
    for _, rate, _, _, seconds, cpu, _, ratio, cpu_ratio in rows.values():
        # seconds are printed to 0.01 and events/s to 1
        assert 200 / (seconds + 0.005) - 1 <= rate <= 200 / max(seconds - 0.005, 1e-9) + 1
        assert ratio == pytest.approx(rate / raw[1], rel=0.01, abs=0.001)
        # CPU seconds are printed to 0.01: the per-CPU ratio lies within what they allow
        assert cpu > 0
        low, high = (raw[5] - 0.005) / (cpu + 0.005), (raw[5] + 0.005) / max(cpu - 0.005, 1e-9)
        assert low - 0.001 <= cpu_ratio <= high + 0.001
    per_cpu = re.search(r"per CPU second: (\d+\.\d{3}) \((met|NOT met)\)", out)
    assert per_cpu and float(per_cpu.group(1)) == ieca[8]
    assert ieca[3] >= ieca[1]  # link updates/s: every event changes some of its 30 links
    ratio = re.search(r"ratio ieca / pass-through: (\d+\.\d\d)", out)
    assert ratio and float(ratio.group(1)) == pytest.approx(ieca[1] / passed[1], abs=0.011)


def test_bench_ui_runs_ieca_again_with_the_page_open(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`--ui` adds IECA with the operator's page served and polled: the same events and
    entries as IECA without it, and its ratio to that row printed."""
    argv = ["bench", "--events", "200", "--urls", "3000", "--repeats", "1", "--step-size", "50"]
    assert main([*argv, "--ui", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    ieca, page = _figures(_cells(out, "ieca+rocksdb")), _figures(_cells(out, "+page open"))
    assert page[0] == ieca[0] == 200
    assert page[2] == ieca[2] > 0  # the page changes nothing the job writes
    ratio = re.search(r"page open / without: events/s (\d+\.\d{3}), events per CPU", out)
    assert ratio and float(ratio.group(1)) == pytest.approx(page[1] / ieca[1], rel=0.02)


def test_popularity_draws_equal_numpy_choice() -> None:
    """The inverse-CDF draw is `choice(p=...)` without its O(n) set-up per call: the same
    ranks from the same generator state, in batches of any size."""
    weights = np.arange(1, 1001, dtype=np.float64) ** -0.8
    expected = np.random.default_rng(3).choice(1000, size=5_000, p=weights / weights.sum())
    rng = np.random.default_rng(3)
    popularity = LinkPopularity(1000)
    got = np.concatenate([popularity.draw(rng, 1_000), popularity.draw(rng, 4_000)])
    assert got.tolist() == expected.tolist()


def test_generated_log_is_skewed_and_deterministic() -> None:
    """The most popular URL is linked from a large share of the pages, the least popular
    from almost none; the same seed gives the same log."""
    setup = BenchSetup(events=300, outlinks=10, urls=1000)
    events = list(generated_events(setup, seed=5))
    assert events == list(generated_events(setup, seed=5))
    assert [e["url"] for e in events[:2]] == [bench_url(0), bench_url(7919 % 1000)]
    links = [url for e in events for url in e["outlinks"]]  # type: ignore[attr-defined]
    assert all(len(e["outlinks"]) == 10 for e in events)  # type: ignore[arg-type]
    # H = Σ k^-0.8 (k = 1..1000) = 15.47: one draw is rank 0 with p = 0.065, so 74% of the
    # pages draw it among their 20 draws (fewer keep it among their first 10 distinct), and
    # rank 999 with p = 1000^-0.8 / H = 2.6e-4: 1.5 times expected in 6,000 draws
    assert 100 <= links.count(bench_url(0)) <= 0.74 * 300
    assert links.count(bench_url(999)) < 10


def test_uniform_links_put_nearly_every_link_on_a_new_url() -> None:
    """`links=uniform`: no URL is favoured (over 1,000 URLs, 6,000 draws give each ~6,
    where popularity gives rank 0 over 100 links), and over 10M URLs 300 pages of 10
    links reach ~3,300 distinct URLs (expected collisions 3,300² / 2e7 ≈ 0.5)."""
    setup = BenchSetup(events=300, outlinks=10, urls=1000, links="uniform")
    links = [u for e in generated_events(setup, seed=5) for u in e["outlinks"]]  # type: ignore[attr-defined]
    assert max(links.count(bench_url(rank)) for rank in range(20)) < 20
    wide = BenchSetup(events=300, outlinks=10, urls=10_000_000, links="uniform")
    seen = np.zeros(wide.urls, dtype=np.bool_)
    assert len(list(generated_events(wide, seed=5, seen=seen))) == 300
    assert 3_290 <= int(seen.sum()) <= 3_300
    with pytest.raises(ValueError, match="links: one of zipf, uniform"):
        BenchSetup(links="pareto")


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_cached_prism_is_found_where_build_sh_puts_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    binary = _executable(home / ".cache" / "frontierflow" / "prism" / "2.75.0" / "prism")
    assert cached_prism("2.75.0", {}, home) == binary
    assert cached_prism("2.74.0", {}, home) is None  # another version's binary is not it
    xdg = _executable(tmp_path / "xdg" / "frontierflow" / "prism" / "2.75.0" / "prism")
    assert cached_prism("2.75.0", {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, home) == xdg
    own = _executable(tmp_path / "own" / "2.75.0" / "prism")
    env = {"PRISM_CACHE": str(tmp_path / "own"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert cached_prism("2.75.0", env, home) == own
    own.chmod(0o644)  # half-written, not executable: not taken
    assert cached_prism("2.75.0", env, home) is None


def test_cached_flink_job_server_in_the_script_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cache = home / ".cache" / "frontierflow" / "flink"
    cache.mkdir(parents=True)
    fallback = cache / "beam-runners-flink-1.19-job-server-2.62.0-launcher.jar"
    fallback.write_bytes(b"PK")
    assert cached_flink_job_server("2.75.0", {}, home) is None  # no .complete marker yet
    Path(f"{fallback}.complete").touch()
    assert cached_flink_job_server("2.75.0", {}, home) == fallback
    assert cached_flink_job_server("2.75.0", {"FLINK_RUNNER_FALLBACK_VERSION": ""}, home) is None
    assembled = cache / "beam-runners-flink-1.19-job-server-2.75.0-launcher.jar"
    assembled.write_bytes(b"PK")
    Path(f"{assembled}.complete").touch()
    assert cached_flink_job_server("2.75.0", {}, home) == assembled
    published = cache / "beam-runners-flink-1.19-job-server-2.75.0.jar"
    published.write_bytes(b"PK")
    assert cached_flink_job_server("2.75.0", {}, home) == published
    env = {"FLINK_JOB_SERVER_CACHE": str(tmp_path / "elsewhere")}
    assert cached_flink_job_server("2.75.0", env, home) is None


def test_find_runner_outside_a_checkout(tmp_path: Path) -> None:
    """A non-editable install has no infra/ beside it: the cache, else a note naming the
    option and the script."""
    home, no_infra = tmp_path / "home", tmp_path / "site-packages" / "infra"
    found = find_runner("prism", "2.75.0", env={}, home=home, infra=no_infra)
    assert found.path is None
    prism_path = home / ".cache" / "frontierflow" / "prism" / "2.75.0" / "prism"
    assert found.note == (
        f"skipped: nothing cached at {prism_path} and no infra/prism/build.sh beside this "
        "install; pass --prism-location=PATH, or run `bash infra/prism/build.sh` once from "
        "a checkout of frontierflow (it caches there and later runs find it)"
    )
    flink = find_runner("flink", "2.75.0", env={}, home=home, infra=no_infra)
    assert flink.path is None
    assert "pass --flink-job-server-jar=PATH, or run `bash infra/flink/fetch-job-server.sh`" in (
        flink.note
    )
    _executable(prism_path)
    found = find_runner("prism", "2.75.0", env={}, home=home, infra=no_infra)
    assert found.path == str(prism_path)
    assert found.note == f"cached: {prism_path}"


def test_find_runner_runs_the_checkout_script_when_nothing_is_cached(tmp_path: Path) -> None:
    infra = tmp_path / "repo" / "infra"
    built = _executable(tmp_path / "built" / "prism")
    script = infra / "prism" / "build.sh"
    script.parent.mkdir(parents=True)
    script.write_text(f"echo building >&2\necho {built}\n")
    found = find_runner("prism", "2.75.0", env={}, home=tmp_path / "home", infra=infra)
    assert found.path == str(built)
    assert found.note == "from infra/prism/build.sh"
    script.write_text("echo 'go not found' >&2\nexit 1\n")
    found = find_runner("prism", "2.75.0", env={}, home=tmp_path / "home", infra=infra)
    assert found.path is None
    assert found.note == "skipped: infra/prism/build.sh failed: go not found"
    assert os.access(built, os.X_OK)


def test_raw_ceiling_writes_what_the_pass_through_writes(tmp_path: Path) -> None:
    """fastavro alone and the project's pass-through write the same FrontierEntries (one per
    outlink, the event's URL as `via`, its fetch time as `emitted_at`); only the strategy
    name differs. Step 7 does not divide 40: the last block holds the remainder."""
    log = tmp_path / "events.avro"
    generate_log(log, BenchSetup(events=40, outlinks=5, urls=300))
    assert raw_ceiling(log, tmp_path / "raw.avro", 7) == (40, 200)
    assert pass_through(log, tmp_path / "pass.avro", 7) == (40, 200)
    raw = list(read_container(tmp_path / "raw.avro", "FrontierEntry"))
    passed = list(read_container(tmp_path / "pass.avro", "FrontierEntry"))
    assert {e["strategy"] for e in raw} == {"raw"}
    assert raw == [{**e, "strategy": "raw"} for e in passed]
    first = next(generated_events(BenchSetup(events=1, outlinks=5, urls=300)))
    assert [e["url"] for e in raw[:5]] == list(first["outlinks"])  # type: ignore[call-overload]
    assert raw[0]["via"] == first["url"] and raw[0]["emitted_at"] == first["fetched_at"]


def test_the_job_run_is_the_replay_with_the_speed_controller(tmp_path: Path) -> None:
    """`bench kafka`'s replay row runs what `frontierflow replay` runs by default: IECA and
    the crawl-speed controller, whose decisions it writes; the entries are the plain IECA
    run's (the controller decides thread counts, not priorities)."""
    log = tmp_path / "events.avro"
    generate_log(log, BenchSetup(events=60, outlinks=5, urls=300))
    runs = {}
    for kind in ("ieca", JOB_RUN):
        (tmp_path / kind).mkdir()
        runs[kind] = spawn_bench_worker(kind, log, tmp_path / kind, 7)
    assert runs["ieca"]["events"] == runs[JOB_RUN]["events"] == 60
    plain = list(read_container(tmp_path / "ieca" / "out.avro", "FrontierEntry"))
    with_speed = list(read_container(tmp_path / JOB_RUN / "out.avro", "FrontierEntry"))
    assert plain == with_speed
    assert not (tmp_path / "ieca" / "out.avro.decisions.jsonl").exists()
    decisions = (tmp_path / JOB_RUN / "out.avro.decisions.jsonl").read_text().splitlines()
    assert decisions  # the log's events span at least one of the controller's windows


def test_cluster_runners_submit_to_the_session_cluster() -> None:
    """`bench beam`'s two cluster rows: parallelism 1 with the workers in the submitting
    process, parallelism 2 with the worker pool that survives two TaskManagers; both
    upload no jars (the cluster of `infra/flink/cluster.sh` has the job server's)."""
    p1 = beam_args("flink-cluster", None, "/j.jar", None, "127.0.0.1:8081", None)
    assert p1 == [
        "--runner=FlinkRunner",
        "--flink_master=127.0.0.1:8081",
        "--flink_version=1.19",
        "--flink_job_server_jar=/j.jar",
        "--pipeline_resources_detector_factory_class=frontierflow.flink.ClusterClassPath",
        "--environment_type=LOOPBACK",
        "--parallelism=1",
    ]
    p2 = beam_args("flink-cluster-2", None, "/j.jar", None, "127.0.0.1:8081", "127.0.0.1:50000")
    assert p2[-3:] == [
        "--environment_type=EXTERNAL",
        "--environment_config=127.0.0.1:50000",
        "--parallelism=2",
    ]
    warm = beam_args(
        "flink-cluster-2",
        None,
        "/j.jar",
        None,
        "127.0.0.1:8081",
        "127.0.0.1:50000",
        "127.0.0.1:8099",
    )
    assert warm == [
        o.replace("--flink_job_server_jar=/j.jar", "--job_endpoint=127.0.0.1:8099") for o in p2
    ]


def test_cluster_runners_without_a_cluster_are_skipped_with_a_note(tmp_path: Path) -> None:
    report = run_beam_bench(
        events=3, runners=("embedded", "flink-cluster-2"), repeats=1, work_dir=tmp_path
    )
    assert "flink-cluster: no --flink-master" in report
    assert "cluster-p2" not in report.split("ratio:")[0]


def test_graph_log_is_a_breadth_first_crawl_with_real_outlinks(tmp_path: Path) -> None:
    """A graph of 6 nodes, by hand: 0 → 1, 2; 1 → 3, 0; 2 → 3, 4; 3 → 5; 4, 5 → nothing.
    Breadth-first from 0: 0, 1, 2, 3, 4, 5 (3 is queued once, by 1, before 2 names it)."""
    edges = tmp_path / "g.tsv"
    edges.write_text("0\t1\n0\t2\n1\t3\n1\t0\n2\t3\n2\t4\n3\t5\n")
    web = read_graph(str(edges))
    assert breadth_first(web, 10) == [0, 1, 2, 3, 4, 5]
    assert breadth_first(web, 3) == [0, 1, 2]
    log = tmp_path / "g.avro"
    assert write_graph_log(log, str(edges), 4) == (4, (2 + 2 + 2 + 1) / 4)
    events = list(read_container(log))
    assert [e["url"] for e in events] == [node_url(n) for n in (0, 1, 2, 3)]
    assert events[1]["outlinks"] == [node_url(3), node_url(0)]  # in order, seen ones too
    assert [e["fetched_at"] for e in events] == [FIRST_FETCH_MS + i for i in range(4)]


def test_bench_beam_on_a_graph_crawl(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`bench beam --graph`: the log's header says what it is, and the run gives every
    node fetched or linked a state."""
    edges = tmp_path / "g.tsv"
    edges.write_text("0\t1\n0\t2\n1\t3\n1\t0\n2\t3\n2\t4\n3\t5\n")
    argv = ["bench", "beam", "--graph", str(edges), "--events", "5", "--repeats", "1"]
    assert main([*argv, "--runners", "embedded", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"log: 5 FetchEvents, a breadth-first crawl of {edges}, 1.4 outlinks a page" in out
    row = out.splitlines()[2].split()
    assert row[0] == "embedded" and row[-2] == "6"  # every node has a state
