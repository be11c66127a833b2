"""Test helper (not a test file): the live job as a `frontierflow run` process on a test's
topics, for the tests that kill it with SIGKILL mid-crawl and start it again on the same
state directory, then let a last run apply whatever the killed one left uncommitted."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from frontierflow.connectors.kafka import KafkaSettings


class JobProcess:
    """`frontierflow run` with `args` (strategy and its options) on `settings`' topics."""

    def __init__(self, settings: KafkaSettings, state_dir: Path, *args: str) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None

    def argv(self, *extra: str) -> list[str]:
        t = self.settings.topics
        return [
            sys.executable, "-m", "frontierflow.pipelines.cli", "run",
            "--bootstrap-servers", self.settings.bootstrap_servers,
            "--group-id", self.settings.group_id,
            "--topic-fetch-events", t.fetch_events, "--topic-frontier", t.frontier,
            "--topic-fetcher-control", t.fetcher_control, "--topic-dead-letter", t.dead_letter,
            "--topic-seeds", t.seeds, "--topic-fetched", t.fetched,
            "--state-dir", str(self.state_dir), "--step-size", "50",
            "--speed-controller", "none", *self.args, *extra,
        ]  # fmt: skip

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv(), stderr=subprocess.PIPE)

    def check_running(self) -> None:
        """Fail with the tail of its log when the job has ended."""
        process = self.process
        assert process is not None and process.poll() is None, (
            process.stderr.read().decode()[-3000:] if process and process.stderr else ""
        )

    def kill_and_restart(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=60) == -signal.SIGKILL
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)

    def finish(self) -> None:
        """A run to the end of the input (`--exit-when-idle`): what the last run left
        uncommitted is applied."""
        done = subprocess.run(self.argv("--exit-when-idle"), capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
