"""The operator's page in a real browser: headless Chromium (Debian's chromium and
chromium-driver, driven by selenium) against a live `frontierflow run --ui-port` job on the
real broker. The page's numbers must equal the job's own Prometheus counters, the charts
must draw, the page must come back after the job restarts, and markup from the crawl
(URLs, dead-letter bytes, a fetcher id) must show as text and never run."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from frontierflow.connectors.kafka import KafkaSettings

pytestmark = pytest.mark.kafka

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DEADLINE_S = 60.0
SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "operators-page.png"
"""Written when FRONTIERFLOW_SCREENSHOTS=docs (the README shows it); else under tmp_path."""
EVIL = "<script>window.__pwned=1</script>"
EVIL_IMG = '"><img/src=x/onerror=window.__pwned=2>'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromium-driver are missing (.ci/run installs them)")
        pytest.skip("apt-get install chromium chromium-driver to run the browser tests")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,2200",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(DEADLINE_S)
    try:
        yield driver
    finally:
        driver.quit()


class Job:
    """`frontierflow run` in its own process, with its metrics and its page on fixed ports
    (so a restart serves the same address)."""

    def __init__(self, settings: KafkaSettings, state: Path, extra: list[str]) -> None:
        self.settings = settings
        self.state = state
        self.extra = extra
        self.metrics_port = _free_port()
        self.ui_port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = state.parent / "job.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}/"

    def start(self) -> None:
        t = self.settings.topics
        with self.log.open("ab") as log:
            self._start(t, log)
        wait_for(self._answers, "the job's page to answer", DEADLINE_S)

    def _start(self, t: Any, log: Any) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "frontierflow.pipelines.cli",
                "run",
                "--bootstrap-servers",
                self.settings.bootstrap_servers,
                "--strategy",
                "ieca",
                "--budget",
                "1000",
                "--state-dir",
                str(self.state),
                "--step-size",
                "25",
                "--group-id",
                self.settings.group_id,
                "--speed-window-ms",
                "40",
                "--metrics-port",
                str(self.metrics_port),
                "--ui-port",
                str(self.ui_port),
                *(f"--topic-{name}={getattr(t, name.replace('-', '_'))}" for name in TOPICS),
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the job ended: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(self.url + "api/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=DEADLINE_S)

    def metrics(self) -> dict[str, float]:
        """The job's Prometheus counters: name{labels} → value."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


TOPICS = ("fetch-events", "frontier", "fetcher-control", "dead-letter", "seeds", "fetched")


@pytest.fixture
def job(tmp_path: Path, kafka_broker: Any, kafka_client: Any) -> Iterator[Job]:
    running = Job(kafka_client.settings(kafka_broker.bootstrap), tmp_path / "state", [])
    running.start()
    try:
        yield running
    finally:
        running.stop()


DRAWN = """return {
  rates: document.querySelectorAll('#chart-rates polyline').length,
  hosts: document.querySelectorAll('#chart-hosts rect').length,
  top: document.querySelectorAll('#top-entries tbody tr').length,
  fetchers: document.querySelectorAll('#fetchers .fetcher').length,
  dead: document.querySelectorAll('#dead-letters .dead').length,
  status: document.getElementById('status').textContent,
}"""


def _number(driver: Any, element_id: str) -> str:
    return str(driver.find_element("id", element_id).get_attribute("data-value"))


def _texts(driver: Any, selector: str, attribute: str | None = None) -> list[str]:
    """The texts (or `attribute`s) of the elements `selector` matches, read in one script:
    the page redraws its tables and charts at every poll, so elements found first and read
    after may be gone by then (selenium's StaleElementReferenceException)."""
    script = (
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " e => arguments[1] ? e.getAttribute(arguments[1]) : e.textContent.trim())"
    )
    return [str(t) for t in driver.execute_script(script, selector, attribute)]


def _page_numbers(driver: Any) -> dict[str, str]:
    return {
        name: _number(driver, f"total-{name}")
        for name in ("events", "duplicates", "entries", "removals", "dead-letters", "decisions")
    }


def test_page_shows_the_jobs_own_counters(
    job: Job, browser: Any, kafka_client: Any, tmp_path: Path
) -> None:
    records = kafka_client.events(300, seed=3)
    bad = [b"\x00\x01 not avro", b'{"url": "https://x.example/"}', b"{" * 20]
    kafka_client.produce(job.settings, [*kafka_client.avro(records), *bad])
    distinct = len({r["url"] for r in records})
    wait_for(
        lambda: job.metrics().get("frontierflow_events_total") == distinct,
        "the job to apply every event",
        DEADLINE_S,
    )
    metrics = wait_for(
        lambda: (
            (m := job.metrics())
            and sum(v for k, v in m.items() if k.startswith("frontierflow_dead_letters_total")) == 3
            and m
        ),
        "the job to dead-letter the three bad records",
        DEADLINE_S,
    )
    expected = {
        "events": metrics["frontierflow_events_total"],
        "duplicates": metrics["frontierflow_duplicate_events_total"],
        "entries": metrics["frontierflow_frontier_entries_total"],
        "removals": metrics["frontierflow_frontier_tombstones_total"],
        "dead-letters": 3.0,
        "decisions": metrics["frontierflow_scaling_decisions_total"],
    }
    assert expected["decisions"] > 0  # 40 ms speed windows over 300 ms of event time
    browser.get(job.url)
    want = {name: str(int(value)) for name, value in expected.items()}
    wait_for(lambda: _page_numbers(browser) == want, f"the page to show {want}", DEADLINE_S)
    # the texts say the same numbers, formatted
    for name, value in want.items():
        shown = browser.find_element("id", f"total-{name}").text
        assert shown.replace(",", "") == value
    # every chart drew from the job's data
    drawn: list[Any] = []

    def charts_drawn() -> bool:
        drawn[:] = [browser.execute_script(DRAWN)]
        counts = drawn[0]
        return (
            bool(counts["rates"] and counts["hosts"] and counts["top"] and counts["dead"])
            and counts["fetchers"] == 3
        )

    try:
        wait_for(charts_drawn, "the charts to draw", DEADLINE_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {drawn}") from None
    dead_by_reason = {
        re.search(r'error_class="([^"]+)"', k).group(1): int(v)  # type: ignore[union-attr]
        for k, v in metrics.items()
        if k.startswith("frontierflow_dead_letters_total{")
    }
    headings = _texts(browser, "#dead-letters h3")
    assert sorted(headings) == sorted(f"{r}: {n}" for r, n in dead_by_reason.items())
    # the top entry on the page is the highest priority the job wrote, among URLs not fetched
    top_priority = float(_texts(browser, "#top-entries tbody td")[0])
    latest = kafka_client.latest_frontier(job.settings)
    assert top_priority == pytest.approx(max(e["priority"] for e in latest.values()), abs=1e-4)
    # the host bars count the URLs still queued on the frontier topic, per host
    per_host: dict[str, int] = {}
    for entry in latest.values():
        per_host[entry["host"]] = per_host.get(entry["host"], 0) + 1
    assert int(_number(browser, "frontier-size")) == len(latest)
    bars = _texts(browser, "#chart-hosts text")
    top_host, top_count = bars[0], int(bars[1].replace(",", ""))
    assert per_host[top_host] == top_count == max(per_host.values())

    to_docs = os.environ.get("FRONTIERFLOW_SCREENSHOTS") == "docs"
    shot = SCREENSHOT if to_docs else tmp_path / "operators-page.png"
    page_height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, max(900, int(page_height) + 40))
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the job restarts: the page says so, then shows the new job's counters
    job.stop()
    wait_for(
        lambda: browser.find_element("tag name", "body").get_attribute("data-connected") == "0",
        "the page to notice the job is gone",
        DEADLINE_S,
    )
    job.start()
    wait_for(
        lambda: (
            "restarted" in browser.find_element("id", "status").text
            and _number(browser, "total-events") == "0"
        ),
        "the page to reconnect to the restarted job",
        DEADLINE_S,
    )


def test_markup_from_the_crawl_shows_as_text_and_never_runs(
    job: Job, browser: Any, kafka_client: Any
) -> None:
    evil_links = [f"https://evil.example/{EVIL}", f"https://evil.example/a{EVIL_IMG}"]
    records = kafka_client.events(4, seed=5)
    for i, record in enumerate(records):
        record["outlinks"] = evil_links
        record["fetcher_id"] = f"f{EVIL}"
        record["fetched_at"] += 100 * i  # 40 ms windows: the first ones close and decide
    kafka_client.produce(job.settings, [*kafka_client.avro(records), EVIL.encode()])
    browser.get(job.url)
    wait_for(
        lambda: (
            _number(browser, "total-dead-letters") == "1"
            and len(browser.find_elements("css selector", "#top-entries tbody tr")) >= 2
            and len(browser.find_elements("css selector", "#fetchers h3")) > 0
        ),
        "the page to show the crawl's markup",
        DEADLINE_S,
    )
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    # the only script is the page's own, and no image was made from the crawl's text
    assert browser.execute_script("return document.scripts.length") == 1
    assert browser.execute_script("return document.images.length") == 0
    shown_urls = _texts(browser, "#top-entries td.url", "title")
    assert set(evil_links) <= set(shown_urls)
    raw = _texts(browser, "#dead-letters pre.raw")[0]
    assert raw == EVIL
    fetchers = set(_texts(browser, "#fetchers h3"))
    assert fetchers == {f"f{EVIL}"}
