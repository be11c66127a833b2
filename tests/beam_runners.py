"""Pytest plugin (not a test file): Beam's Prism and Flink runners, built from nothing.

Loaded by ``tests/conftest.py`` through ``pytest_plugins``. It registers the
``beam_runner`` marker and defines three session fixtures:

* ``prism_binary``: the path of Beam's Prism runner, built by ``infra/prism/build.sh``
  (``go install`` at the Beam version pinned in pyproject.toml, cached under
  ``~/.cache/frontierflow/prism/<version>/``). Pass it as ``--prism_location``.
* ``flink_job_server_jar``: the path of Beam's Flink job server, resolved through Maven by
  ``infra/flink/fetch-job-server.sh`` (cached under ``~/.cache/frontierflow/flink/``).
  Pass it as ``--flink_job_server_jar``.
* ``flink_conf_dir``: ``infra/flink``, whose ``config.yaml`` selects the RocksDB state
  backend. Pass it as ``--flink_conf_dir``.

With those explicit locations Beam never tries to download a runner. A fixture skips only
when a tool it needs is missing (``go`` for Prism; ``java`` and ``mvn`` for Flink) and
nothing is cached; any other failure of a script fails the tests that use it, with the
script's messages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRISM_BUILD = REPO / "infra" / "prism" / "build.sh"
FLINK_FETCH = REPO / "infra" / "flink" / "fetch-job-server.sh"
FLINK_CONF_DIR = REPO / "infra" / "flink"

# A cold `go install` of Prism takes ~5 min on 2 idle cores; a cold Maven resolution of
# the Flink job server (~190 MB of jars) well under that. Both are cached afterwards.
PRISM_BUILD_TIMEOUT_S = 1800
FLINK_FETCH_TIMEOUT_S = 1200


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "beam_runner: runs a Beam pipeline on Prism or Flink (built/resolved by infra/ scripts)",
    )


def _run_infra_script(
    script: Path, timeout: float, needs: tuple[str, ...], args: tuple[str, ...] = ()
) -> Path:
    """Run an infra script that prints one path; skip if a needed tool is missing."""
    missing = [tool for tool in needs if shutil.which(tool) is None]
    try:
        proc = subprocess.run(
            ["bash", str(script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"{script.relative_to(REPO)} did not finish within {timeout}s\n"
            f"--- stderr ---\n{e.stderr or ''}",
            pytrace=False,
        )
    if proc.returncode != 0:
        if missing:  # the script needed the tool: nothing was cached
            pytest.skip(f"{' and '.join(missing)} not installed: cannot run {script.name}")
        pytest.fail(
            f"{script.relative_to(REPO)} failed with exit code {proc.returncode}\n"
            f"--- stderr ---\n{proc.stderr}",
            pytrace=False,
        )
    lines = proc.stdout.strip().splitlines()
    if len(lines) != 1 or not Path(lines[0]).is_file():
        pytest.fail(
            f"{script.relative_to(REPO)} printed {lines!r}, expected one existing path\n"
            f"--- stderr ---\n{proc.stderr}",
            pytrace=False,
        )
    return Path(lines[0])


@pytest.fixture(scope="session")
def prism_binary() -> Path:
    """Path of Beam's Prism runner binary at the pinned Beam version (for --prism_location)."""
    return _run_infra_script(PRISM_BUILD, PRISM_BUILD_TIMEOUT_S, ("go",))


@pytest.fixture(scope="session")
def flink_job_server_jar() -> Path:
    """Path of Beam's Flink job-server jar (for --flink_job_server_jar)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("java not installed: the Flink job server cannot run here")
    return _run_infra_script(FLINK_FETCH, FLINK_FETCH_TIMEOUT_S, ("mvn", "java"))


@pytest.fixture(scope="session")
def kafka_expansion_jar(flink_job_server_jar: Path) -> Path:
    """The launcher of the expansion service that gives Beam Java's KafkaIO, assembled
    beside the job server (which carries KafkaIO for Flink to run)."""
    return _run_infra_script(
        FLINK_FETCH, FLINK_FETCH_TIMEOUT_S, ("mvn", "java"), ("--kafka-expansion-service",)
    )


@pytest.fixture(scope="session")
def flink_conf_dir() -> Path:
    """infra/flink: its config.yaml sets the RocksDB state backend (for --flink_conf_dir)."""
    return FLINK_CONF_DIR
