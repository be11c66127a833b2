"""Pytest plugin (not a test file): a standalone Flink session cluster for the test session.

Loaded by ``tests/conftest.py`` through ``pytest_plugins``. Two session fixtures:

* ``flink_cluster``: a JobManager and two TaskManagers (two slots each), separate JVMs
  started by ``infra/flink/cluster.sh start`` in a temporary folder, stopped at the end of
  the session. ``FlinkCluster.beam_args`` gives the options that submit a Beam pipeline to
  it; ``kill_taskmanager``/``start_taskmanager``/``stop_job`` serve fault and savepoint
  tests.
* ``flink_worker_pool``: the SDK worker pool of ``infra/flink/worker_pool.py``, running
  its workers as threads of this process (what LOOPBACK does, but safe with two
  TaskManagers: see that module). Pipelines reach it with ``--environment_type=EXTERNAL``.

The cluster fixture skips only when ``java`` or ``mvn`` is missing and nothing is cached
(the job server, or the cluster's class path); any other failure fails the tests that use
it, with the script's messages and the logs' errors.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from polling import wait_for

from frontierflow.pipelines.beam.options import CLUSTER_CLASSPATH

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "infra" / "flink" / "cluster.sh"
WORKER_POOL = REPO / "infra" / "flink" / "worker_pool.py"

# A cold start resolves Flink's jars through Maven first (~10 s with a warm ~/.m2); the
# script has its own deadline for the TaskManagers to register (90 s).
START_TIMEOUT_S = 600
COMMAND_TIMEOUT_S = 180


class FlinkCluster:
    """The cluster that ``infra/flink/cluster.sh`` runs in ``cluster_dir``."""

    def __init__(self, cluster_dir: Path, job_server_jar: Path) -> None:
        self.cluster_dir = cluster_dir
        self.job_server_jar = job_server_jar
        self.rest_address = ""

    def run(self, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
        """One ``cluster.sh`` command; its stdout. Raises RuntimeError with its stderr."""
        env = {**os.environ, "FLINK_CLUSTER_DIR": str(self.cluster_dir), "PYTHON": sys.executable}
        java_home = os.environ.get("JAVA_HOME")
        if java_home:
            env["PATH"] = f"{java_home}/bin{os.pathsep}{env.get('PATH', '')}"
        try:
            proc = subprocess.run(
                ["bash", str(CLUSTER), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or ""
            raise RuntimeError(
                f"cluster.sh {' '.join(args)} did not finish within {timeout}s\n"
                f"--- stderr ---\n{stderr}"
            ) from e
        if proc.returncode != 0:
            raise RuntimeError(
                f"cluster.sh {' '.join(args)} failed with exit code {proc.returncode}\n"
                f"--- stderr ---\n{proc.stderr}"
            )
        return proc.stdout

    def start(self) -> str:
        out = self.run("start", timeout=START_TIMEOUT_S).strip().splitlines()
        if len(out) != 1 or not out[0].startswith("127.0.0.1:"):
            raise RuntimeError(f"cluster.sh start printed {out!r}, expected one REST address")
        self.rest_address = out[0]
        return self.rest_address

    def stop(self) -> None:
        self.run("stop")

    def kill_taskmanager(self, n: int) -> None:
        """SIGKILL TaskManager ``n`` (a crash: no deregistration)."""
        self.run("kill-taskmanager", str(n))

    def start_taskmanager(self, n: int) -> None:
        """Start a fresh TaskManager ``n``; returns once it has registered."""
        self.run("start-taskmanager", str(n))

    def stop_job(self, job_id: str) -> str:
        """Take a savepoint of a streaming job and cancel it (`cluster.sh stop-job`: not
        Flink's stop, which Beam's runner drains); the savepoint's path, once the job has
        ended."""
        return self.run("stop-job", job_id).strip()

    def savepoint(self, job_id: str) -> str:
        """Trigger a savepoint of a running job; its path."""
        return self.run("savepoint", job_id).strip()

    def rest(self, path: str) -> Any:
        """GET a path of Flink's REST API, decoded from JSON."""
        with urllib.request.urlopen(f"http://{self.rest_address}{path}", timeout=10) as resp:
            return json.load(resp)

    def cancel_job(self, job_id: str) -> None:
        """Cancel a job and return once the cluster lists it as ended (its slots free)."""
        request = urllib.request.Request(
            f"http://{self.rest_address}/jobs/{job_id}?mode=cancel", method="PATCH"
        )
        with urllib.request.urlopen(request, timeout=10):
            pass
        wait_for(
            lambda: self.jobs().get(job_id) in ("CANCELED", "FAILED", "FINISHED"),
            f"job {job_id} to end",
            COMMAND_TIMEOUT_S,
            0.5,
        )

    def jobs(self) -> dict[str, str]:
        """Every job the cluster knows: id -> state."""
        return {job["jid"]: job["state"] for job in self.rest("/jobs/overview")["jobs"]}

    def beam_args(self, worker_pool: str, parallelism: int) -> list[str]:
        """Options of Beam's FlinkRunner that submit a pipeline to this cluster."""
        return [
            "--runner=FlinkRunner",
            f"--flink_master={self.rest_address}",
            "--flink_version=1.19",
            f"--flink_job_server_jar={self.job_server_jar}",
            f"--job_server_java_launcher={_java()}",
            "--environment_type=EXTERNAL",
            f"--environment_config={worker_pool}",
            f"--parallelism={parallelism}",
            CLUSTER_CLASSPATH,
        ]


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    return os.path.join(java_home, "bin", "java") if java_home else "java"


def load_infra_module(path: Path, name: str) -> ModuleType:
    """A script of infra/flink imported by path, as module `name` (infra/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def load_worker_pool_module() -> ModuleType:
    """infra/flink/worker_pool.py."""
    return load_infra_module(WORKER_POOL, "frontierflow_flink_worker_pool")


@pytest.fixture(scope="session")
def flink_cluster(
    tmp_path_factory: pytest.TempPathFactory, flink_job_server_jar: Path
) -> Iterator[FlinkCluster]:
    """A running standalone Flink session cluster (1 JobManager, 2 TaskManagers x 2 slots)."""
    cluster = FlinkCluster(tmp_path_factory.mktemp("flink-cluster"), flink_job_server_jar)
    try:
        cluster.start()
    except RuntimeError as e:
        missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
        with contextlib.suppress(RuntimeError):
            cluster.stop()  # leave no half-started JVM behind
        if missing:  # the script needed the tool: nothing was cached
            pytest.skip(f"{' and '.join(missing)} not installed: no Flink cluster here")
        pytest.fail(f"the Flink cluster did not start:\n{e}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        # The logs stay with pytest's temporary dirs; the jars each job uploaded do not.
        shutil.rmtree(cluster.cluster_dir / "tmp", ignore_errors=True)


@pytest.fixture(scope="session")
def flink_worker_pool() -> Iterator[str]:
    """Address of an SDK worker pool whose workers are threads of this process."""
    module = load_worker_pool_module()
    address, server, _pool = module.serve(0, use_process=False)
    try:
        yield address
    finally:
        server.stop(grace=None)
