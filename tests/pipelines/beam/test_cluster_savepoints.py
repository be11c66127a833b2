"""``infra/flink/cluster.sh stop-job`` against a declined savepoint.

A Flink task that is starting or closing declines a savepoint; Flink then reports the
savepoint as failed and leaves the job running. The script triggers it again while the
job runs, and gives up on any other failure. Which task closes when cannot be chosen on a
real cluster, so a stand-in for the JobManager's REST API (the three calls the script
makes, with Flink's response shapes) answers here.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "infra" / "flink" / "cluster.sh"
JOB = "a1803593279ff5ad0c65d497b5d1bf41"
DECLINED = {
    "class": "java.util.concurrent.CompletionException",
    "stack-trace": "org.apache.flink.runtime.checkpoint.CheckpointException: "
    "Checkpoint was declined (task is closing)",
}
EXPIRED = {
    "class": "java.util.concurrent.CompletionException",
    "stack-trace": "org.apache.flink.runtime.checkpoint.CheckpointException: "
    "Checkpoint expired before completing.",
}


class _JobManager:
    """Answers the savepoint calls: the n-th savepoint ends as ``outcomes[n]`` (a failure
    cause, or None for a savepoint that completes and, with cancel-job, cancels the job)."""

    def __init__(self, outcomes: list[dict[str, str] | None]) -> None:
        self.outcomes = outcomes
        self.triggers: list[dict[str, Any]] = []
        self.state = "RUNNING"
        jm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                jm.triggers.append(json.loads(self.rfile.read(length)))
                self._send({"request-id": f"trigger-{len(jm.triggers)}"})

            def do_GET(self) -> None:
                if self.path == f"/jobs/{JOB}":
                    self._send({"jid": JOB, "state": jm.state})
                    return
                n = int(self.path.rsplit("-", 1)[1])
                cause = jm.outcomes[n - 1]
                if cause is not None:
                    self._send(
                        {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}}
                    )
                    return
                if jm.triggers[n - 1]["cancel-job"]:
                    jm.state = "CANCELED"
                location = f"file:/savepoints/savepoint-{n}"
                self._send({"status": {"id": "COMPLETED"}, "operation": {"location": location}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _stop_job(outcomes: list[dict[str, str] | None], tmp_path: Path) -> tuple[Any, _JobManager]:
    jm = _JobManager(outcomes)
    (tmp_path / "rest-address").write_text(f"127.0.0.1:{jm.server.server_address[1]}")
    env = {**os.environ, "FLINK_CLUSTER_DIR": str(tmp_path)}
    try:
        proc = subprocess.run(
            ["bash", str(SCRIPT), "stop-job", JOB],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        jm.close()
    return proc, jm


@pytest.mark.parametrize("declined", [1, 2])
def test_a_declined_savepoint_is_taken_again(declined: int, tmp_path: Path) -> None:
    proc, jm = _stop_job([DECLINED] * declined + [None], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"file:/savepoints/savepoint-{declined + 1}"
    assert len(jm.triggers) == declined + 1
    assert all(t["cancel-job"] for t in jm.triggers)
    assert jm.state == "CANCELED"
    assert proc.stderr.count("declined by a task") == declined


def test_a_savepoint_declined_three_times_fails(tmp_path: Path) -> None:
    proc, jm = _stop_job([DECLINED] * 4, tmp_path)
    assert proc.returncode == 1
    assert len(jm.triggers) == 3  # FLINK_CLUSTER_SAVEPOINT_ATTEMPTS
    assert "task is closing" in proc.stderr
    assert jm.state == "RUNNING"


def test_another_failure_is_not_taken_again(tmp_path: Path) -> None:
    proc, jm = _stop_job([EXPIRED, None], tmp_path)
    assert proc.returncode == 1
    assert len(jm.triggers) == 1
    assert "Checkpoint expired" in proc.stderr
