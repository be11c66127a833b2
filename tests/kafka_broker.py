"""Pytest plugin (not a test file): a real single-node Kafka broker for the test session.

Loaded by ``tests/conftest.py`` through ``pytest_plugins``. The ``kafka_broker`` fixture
starts ``infra/kafka/start.sh`` once per session in a temporary data dir and stops it at
the end. Tests can stop and restart it mid-run (same data dir, same ports), for example to
check that clients reconnect and that data survives a broker restart.

Without Java or Maven the fixture skips; any other failure to start fails loudly, with the
tail of the broker's log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
START = REPO / "infra" / "kafka" / "start.sh"
STOP = REPO / "infra" / "kafka" / "stop.sh"

# Resolving the jars on a machine whose ~/.m2 is empty takes a while; the broker itself
# has its own deadline inside start.sh (KAFKA_START_TIMEOUT, 120 s).
START_TIMEOUT_S = 900
STOP_TIMEOUT_S = 120


class KafkaBroker:
    """A broker run by infra/kafka/{start,stop}.sh in ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.bootstrap = ""

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no broker.log)"
        return "\n".join(text.splitlines()[-lines:])

    def _run(self, script: Path, timeout: float) -> str:
        # start.sh probes readiness with kafka-python: use this interpreter's.
        env = {**os.environ, "PYTHON": sys.executable}
        try:
            proc = subprocess.run(
                ["bash", str(script), str(self.data_dir)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(
                f"{script.name} did not finish within {timeout}s\n"
                f"--- stderr ---\n{e.stderr or ''}\n"
                f"--- tail of {self.log_file} ---\n{self.log_tail()}"
            ) from e
        if proc.returncode != 0:
            raise RuntimeError(
                f"{script.name} failed with exit code {proc.returncode}\n"
                f"--- stderr ---\n{proc.stderr}\n"
                f"--- tail of {self.log_file} ---\n{self.log_tail()}"
            )
        return proc.stdout

    def start(self) -> str:
        """Start (or restart) the broker; returns once it answers a metadata request."""
        out = self._run(START, START_TIMEOUT_S).strip().splitlines()
        if len(out) != 1 or not out[0].startswith("127.0.0.1:"):
            raise RuntimeError(f"start.sh printed {out!r}, expected one bootstrap line")
        self.bootstrap = out[0]
        return self.bootstrap

    def stop(self) -> None:
        """Stop the broker, keeping its data and ports for the next start()."""
        self._run(STOP, STOP_TIMEOUT_S)


def _missing_tools() -> str | None:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed: the Kafka broker cannot run here"
    return None


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running single-node Kafka broker (KRaft), shared by the whole session."""
    reason = _missing_tools()
    if reason:
        pytest.skip(reason)
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    try:
        broker.start()
    except RuntimeError as e:
        with contextlib.suppress(RuntimeError):
            broker.stop()  # leave no half-started JVM behind
        pytest.fail(f"the Kafka broker did not start:\n{e}", pytrace=False)
    try:
        yield broker
    finally:
        broker.stop()
