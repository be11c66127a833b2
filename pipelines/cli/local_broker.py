"""The local single-node Kafka broker of `frontierflow crawl`: the scripts of `infra/kafka`
(`start.sh`, `stop.sh`) run on a data folder, from a checkout of frontierflow (an editable
install). When the broker cannot start — no checkout, no Java, no Maven, a broker that does
not answer — `BrokerUnavailable` says why and what to do instead."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "infra" / "kafka"
"""`infra/kafka` of the checkout this module was installed from (`pip install -e .`)."""

START_TIMEOUT_S = 900.0
"""Resolving the jars into an empty `~/.m2` takes a while; start.sh has its own deadline
for the broker itself (KAFKA_START_TIMEOUT, 120 s)."""
STOP_TIMEOUT_S = 120.0
TAIL_LINES = 15

INSTEAD = "or start a Kafka broker yourself and pass --bootstrap-servers HOST:PORT"


class BrokerUnavailable(RuntimeError):
    """The local broker could not be started; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class LocalBroker:
    """The broker whose data, logs and ports live in `data_dir` (reused on a restart: the
    same ports, topics and messages)."""

    data_dir: Path
    scripts: Path = SCRIPTS

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    def start(self) -> str:
        """Start the broker (or find it running) and return its bootstrap address once it
        answers. The broker runs in a session of its own, so a Ctrl-C in the terminal
        reaches the crawl, which stops it last, and not the broker first."""
        self._check_tools()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        out = self._run("start.sh", START_TIMEOUT_S)
        lines = out.strip().splitlines()
        if len(lines) != 1 or ":" not in lines[0]:
            raise BrokerUnavailable(f"infra/kafka/start.sh printed {lines!r}, not an address")
        return lines[0]

    def stop(self) -> None:
        """Stop the broker, keeping its data for the next start (SIGTERM, then SIGKILL)."""
        if (self.data_dir / "broker.pid").exists():
            self._run("stop.sh", STOP_TIMEOUT_S)

    def _check_tools(self) -> None:
        if not (self.scripts / "start.sh").is_file():
            raise BrokerUnavailable(
                f"the local Kafka broker's scripts are not here ({self.scripts}): they come "
                "with a checkout of frontierflow installed with `pip install -e .`; " + INSTEAD
            )
        missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
        if missing:
            raise BrokerUnavailable(
                f"{' and '.join(missing)} not found: the local Kafka broker needs Java 17+ "
                "and Maven (once, to fetch its jars), e.g. `apt-get install "
                "openjdk-17-jre-headless maven`; " + INSTEAD
            )

    def _run(self, script: str, timeout: float) -> str:
        # start.sh probes the broker with kafka-python: this interpreter's
        env = {**os.environ, "PYTHON": sys.executable}
        proc = subprocess.Popen(
            ["bash", str(self.scripts / script), str(self.data_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            # a timeout, or Ctrl-C while it starts: no half-started script left behind
            # (stop.sh, run next, ends a broker it had started)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if proc.returncode != 0:
            tail = "\n".join(err.strip().splitlines()[-TAIL_LINES:])
            raise BrokerUnavailable(
                f"infra/kafka/{script} failed (exit code {proc.returncode}); its log: "
                f"{self.log_file}\n{tail}\nFix the cause above, " + INSTEAD
            )
        return out
