"""`frontierflow crawl` end to end, as a user runs it: a child process crawling the good
site of the loopback test web (tests/hostile_web.py), read back from the server's request
log. On the session's broker: a 60-page run, then a second run on the same state folder
that goes on with the crawl (60 more pages, none fetched twice); a run stopped by SIGINT
that still prints its report, its operator's page answering while it ran (that one on
kafka-python, the others on the default client, confluent-kafka). With its own
broker (infra/kafka, under the state folder): a run after which no process of it remains.
Without Java: a message that says what to do."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from hostile_web import HostileWeb
from polling import wait_for

from frontierflow.pipelines.cli import build_parser, main
from frontierflow.pipelines.cli.crawl import crawl_settings
from frontierflow.pipelines.cli.crawl_progress import CrawlProgress, ProgressDisplay

PAGES = 60
DELAY_S = 0.02
RUN_DEADLINE_S = 120.0


def crawl_command(web: HostileWeb, state: Path, *options: str) -> list[str]:
    return [
        sys.executable, "-m", "frontierflow.pipelines.cli", "crawl",
        "--state-dir", str(state), "--delay", str(DELAY_S), "--allow-private",
        "--resolve", f"{web.good_host}:{web.port}:127.0.0.1", "--ui-port", "0",
        "--idle-exit", "10", *options,
    ]  # fmt: skip


def topic_options(prefix: str) -> list[str]:
    names = ("fetch-events", "frontier", "fetcher-control", "dead-letter", "seeds", "fetched")
    return [arg for name in names for arg in (f"--topic-{name}", f"{prefix}-{name}")]


def run(command: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_DEADLINE_S, cwd=tmp_path
    )
    return done.returncode, done.stdout, done.stderr


def pages_fetched(web: HostileWeb) -> list[str]:
    """Paths of the good site's pages served (robots.txt left out), in order."""
    return [
        r.path for r in web.requests(web.good_host) if r.status == 200 and r.path != "/robots.txt"
    ]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of the running processes that contain `text`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.kafka
def test_a_crawl_and_a_second_run_that_goes_on(kafka_broker: Any, tmp_path: Path) -> None:
    state = tmp_path / "crawl"
    broker = ["--bootstrap-servers", kafka_broker.bootstrap, *topic_options(uuid.uuid4().hex)]
    with HostileWeb() as web:
        seed = f"{web.base(web.good_host)}/"
        first = run(crawl_command(web, state, seed, "--max-pages", str(PAGES), *broker), tmp_path)
        first_pages = pages_fetched(web)
        # the same seed again: the job knows it was fetched
        second = run(crawl_command(web, state, seed, "--max-pages", str(PAGES), *broker), tmp_path)
        second_pages = pages_fetched(web)[len(first_pages) :]
    code, out, err = first
    assert code == 0, err
    assert len(first_pages) == PAGES, err
    assert f"this run: {PAGES} pages" in out
    assert f"downloads {PAGES} ({PAGES} HTML, 0 errors)" in out
    assert "| good.test | " in out  # the per-host tables
    assert "operator's page: http://127.0.0.1:" in err
    code, out, err = second
    assert code == 0, err
    assert len(second_pages) == PAGES, err
    assert not set(second_pages) & set(first_pages)
    assert f"downloads {2 * PAGES} ({2 * PAGES} HTML, 0 errors)" in out
    assert processes_mentioning(str(state)) == []


@pytest.mark.kafka
def test_sigint_stops_the_crawl_and_prints_the_report(kafka_broker: Any, tmp_path: Path) -> None:
    """On kafka-python (the other crawls here take the default, confluent-kafka)."""
    state = tmp_path / "crawl"
    broker = ["--bootstrap-servers", kafka_broker.bootstrap, *topic_options(uuid.uuid4().hex)]
    broker += ["--kafka-client", "kafka-python"]
    with HostileWeb() as web:
        command = crawl_command(web, state, f"{web.base(web.good_host)}/", *broker)
        command[command.index("--delay") + 1] = "0.2"  # 5 pages a second: time to stop it
        out_file, err_file = tmp_path / "out", tmp_path / "err"
        with out_file.open("w") as out, err_file.open("w") as err:
            proc = subprocess.Popen(command, stdout=out, stderr=err, cwd=tmp_path)
            try:
                wait_for(lambda: len(pages_fetched(web)) >= 5, "5 pages fetched")
                page = re.search(r"operator's page: (\S+)", err_file.read_text())
                assert page is not None
                with urllib.request.urlopen(page.group(1) + "api/summary", timeout=10) as r:
                    summary = json.load(r)
                proc.send_signal(signal.SIGINT)
                code = proc.wait(timeout=RUN_DEADLINE_S)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        fetched = len(pages_fetched(web))
    out_text = out_file.read_text()
    assert code == 0, err_file.read_text()
    assert 5 <= fetched < 300
    assert f"this run: {fetched} pages" in out_text
    assert f"downloads {fetched} " in out_text
    assert summary["job"]["command"] == "crawl"
    assert summary["job"]["strategy"] == "ieca"
    assert processes_mentioning(str(state)) == []


@pytest.mark.kafka
@pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("mvn") is None,
    reason="the local broker needs Java and Maven",
)
def test_its_own_broker_is_started_and_stopped(tmp_path: Path) -> None:
    state = tmp_path / "crawl"
    with HostileWeb() as web:
        code, out, err = run(
            crawl_command(web, state, f"{web.base(web.good_host)}/", "--max-pages", "20"),
            tmp_path,
        )
        fetched = len(pages_fetched(web))
    assert code == 0, err
    assert fetched == 20
    assert "Kafka broker on 127.0.0.1:" in err
    assert "this run: 20 pages" in out
    assert (state / "kafka" / "logs" / "meta.properties").exists()  # kept for the next run
    assert processes_mentioning(str(state)) == []


def test_without_java_it_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code = main(
        ["crawl", "--state-dir", str(tmp_path / "crawl"), "--no-ui", "http://example.test/"]
    )
    assert code == 2
    assert "java and mvn not found" in caplog.text
    assert "--bootstrap-servers" in caplog.text


def test_a_state_folder_keeps_its_strategy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "crawl"
    (state).mkdir()
    (state / "crawl.json").write_text(
        '{"strategy": "bfs", "topic": null, "crawl_id": "default", "budget": 60, '
        '"follow_hosts": ["a.test"]}'
    )
    code = main(["crawl", "--state-dir", str(state), "--strategy", "ieca", "--no-ui"])
    assert code == 2
    assert "holds a crawl with --strategy bfs" in caplog.text


def test_a_later_run_follows_the_hosts_of_its_new_urls(tmp_path: Path) -> None:
    state = tmp_path / "crawl"
    first = crawl_settings(build_parser().parse_args(
        ["crawl", "--state-dir", str(state), "--max-pages", "50", "http://a.test:81/"]
    ))  # fmt: skip
    later = crawl_settings(build_parser().parse_args(
        ["crawl", "--state-dir", str(state), "--max-pages", "10", "http://B.test/x",
         "--kafka-client", "kafka-python"]
    ))  # fmt: skip
    assert (first.client_library, later.client_library) == ("auto", "kafka-python")
    assert first.fetcher.follow_hosts == {"a.test:81"}
    assert later.fetcher.follow_hosts == {"a.test:81", "b.test"}
    assert later.strategy.name == "ieca"
    assert json.loads((state / "crawl.json").read_text())["budget"] == 50  # the first run's


def test_a_new_crawl_needs_urls(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    code = main(["crawl", "--state-dir", str(tmp_path / "crawl"), "--no-ui"])
    assert code == 2
    assert "give the starting URLs" in caplog.text


def test_the_rate_is_over_the_last_ten_seconds() -> None:
    """Readings at 0, 5, 12 and 25 s: the rate is taken from the newest reading at least
    10 s old (0 s for the reading at 12 s; 12 s, not 5 s, for the one at 25 s)."""
    display = ProgressDisplay(budget=None, every_s=5.0, stream=io.StringIO())
    assert display.rate(0.0, 0) == 0.0
    assert display.rate(5.0, 10) == 2.0
    assert display.rate(12.0, 30) == 30 / 12
    assert display.rate(25.0, 40) == 10 / 13


def test_without_a_terminal_a_line_every_few_seconds() -> None:
    out = io.StringIO()
    display = ProgressDisplay(budget=60, every_s=3600.0, stream=out)
    for pages in (1, 2, 3):
        display.show(CrawlProgress(pages=pages, queued=7, in_flight=2, workers=4))
    assert out.getvalue().splitlines() == [
        "crawl: 1 pages, 0.0/s, 7 queued, 2 in flight, 4 workers"
    ]
