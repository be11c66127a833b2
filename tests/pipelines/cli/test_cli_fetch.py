"""`frontierflow fetch` as a process: an entry for a loopback address (refused without
--allow-private) becomes a FetchEvent with a negative status and a clear log line, the
Prometheus metrics count it, and SIGTERM stops the fetcher cleanly; with each Kafka client
library (`--kafka-client`)."""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from frontierflow.connectors.fetcher.http import BLOCKED_ADDRESS
from frontierflow.connectors.kafka import ensure_topics, open_writer
from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.records import FetchEvent, FrontierEntry

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_fetch_cli_reports_a_refused_address_serves_metrics_and_stops_on_sigterm(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    settings = dataclasses.replace(
        kafka_client.settings(kafka_broker.bootstrap), client_library=client
    )
    ensure_topics(settings)
    t = settings.topics
    url = "http://127.0.0.1:9/page.html"
    entry = FrontierEntry(url, "127.0.0.1", 5.0, "ieca", "c", 0, None, 1, {"ieca.d": "0.3"})
    writer = open_writer(settings)
    writer.send(t.frontier, url.encode(), encode_record(entry))
    writer.flush()
    writer.close()

    stderr = tmp_path / "fetch.log"
    cmd = [
        sys.executable, "-m", "frontierflow.pipelines.cli", "fetch",
        "--bootstrap-servers", kafka_broker.bootstrap, "--fetcher-id", "cli-1",
        "--group-id", f"{settings.group_id}-cli",
        "--topic-frontier", t.frontier, "--topic-fetch-events", t.fetch_events,
        "--topic-fetcher-control", t.fetcher_control, "--topic-dead-letter", t.dead_letter,
        "--topic-fetched", t.fetched, "--metrics-port", "0",
        "--max-pattern-depth", "3", "--max-lead", "2", "--group-by", "ip",
        "--max-url-chars", "4096", "--max-path-segments", "20", "--max-segment-repeats", "3",
        "--kafka-client", client,
    ]  # fmt: skip
    with stderr.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        events = wait_for(
            lambda: kafka_client.read_topic(settings, t.fetch_events), "the FetchEvent", 90
        )
        event = decode_record(FetchEvent, events[0][1])
        assert (event.url, event.status, event.fetcher_id) == (url, BLOCKED_ADDRESS, "cli-1")
        assert event.echo == {"ieca.d": "0.3"} and event.crawl_id == "c"
        assert event.depth == 0  # an entry with no via: a start page
        log = stderr.read_text()
        assert re.search(r"127\.0\.0\.1:9/page\.html: blocked-address \(status -4\)", log), log
        port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", log)
        assert port is not None, log
        with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics") as page:
            metrics = page.read().decode()
        assert 'frontierflow_fetcher_errors_total{reason="blocked-address"} 1.0' in metrics
        assert 'frontierflow_fetcher_pages_total{status_class="error"} 1.0' in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0
    assert "fetcher cli-1 stopped: 1 downloads" in stderr.read_text()
