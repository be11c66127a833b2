"""infra/flink/worker_pool.py: what a worker process is started with."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from apache_beam.portability.api import beam_fn_api_pb2

from tests.flink_cluster import load_worker_pool_module

# A stand-in for Beam's SDK harness, first on the child's path: it prints what the harness
# would run with instead of connecting to a runner.
_STUB_HARNESS = """
import gc

class SdkHarness:
    def __init__(self, control_url, worker_id, state_cache_size, data_buffer_time_limit_ms):
        self.args = (control_url, worker_id, state_cache_size, data_buffer_time_limit_ms)

    def run(self):
        print(*self.args, *gc.get_threshold())
"""


@pytest.fixture(scope="module")
def pool_module() -> ModuleType:
    return load_worker_pool_module()


def _started_argv(pool: Any, monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[str]:
    started: list[list[str]] = []

    class Recorded:
        def __init__(self, argv: list[str], **_: object) -> None:
            started.append(argv)

        def wait(self) -> int:
            return 0

    request = beam_fn_api_pb2.StartWorkerRequest(worker_id="1-1")
    request.control_endpoint.url = "127.0.0.1:1"
    with monkeypatch.context() as patched:  # `subprocess` is the one module everywhere
        patched.setattr(module.subprocess, "Popen", Recorded)
        assert not pool.StartWorker(request, None).error
    return started[0]


def _run_harness(argv: list[str], tmp_path: Path) -> list[str]:
    """The worker program of `argv` run for real, with the stand-in harness."""
    worker = tmp_path / "apache_beam" / "runners" / "worker"
    worker.mkdir(parents=True)
    for package in (worker.parents[1], worker.parent, worker):
        (package / "__init__.py").write_text("")
    (worker / "sdk_worker.py").write_text(_STUB_HARNESS)
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_a_worker_process_runs_with_the_pools_collector_thresholds(
    pool_module: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pool = pool_module.WorkerPool(
        use_process=True, state_cache_bytes=256 << 20, gc_threshold=(50_000, 20, 100)
    )
    argv = _started_argv(pool, monkeypatch, pool_module)
    assert argv[0] == sys.executable
    assert _run_harness(argv, tmp_path) == [
        "127.0.0.1:1", "1-1", str(256 << 20), "0", "50000", "20", "100"
    ]  # fmt: skip


def test_without_thresholds_a_worker_keeps_pythons_own(
    pool_module: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pool = pool_module.WorkerPool(use_process=True, state_cache_bytes=0)
    argv = _started_argv(pool, monkeypatch, pool_module)
    own = subprocess.run(
        [sys.executable, "-c", "import gc; print(*gc.get_threshold())"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert _run_harness(argv, tmp_path)[-3:] == own


@pytest.mark.parametrize("text", ["50000,20", "a,b,c", "0,10,10", "700,10,10,10"])
def test_gc_threshold_takes_three_positive_integers(pool_module: ModuleType, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        pool_module._gc_threshold(text)
    assert pool_module._gc_threshold("700,10,10") == (700, 10, 10)


def test_the_pools_command_line_raises_the_thresholds_unless_told(pool_module: ModuleType) -> None:
    parse = pool_module._parser().parse_args
    assert parse(["--service_port=0"]).gc_threshold == pool_module.GC_THRESHOLD == (50_000, 20, 100)
    assert parse(["--service_port=0", "--gc-threshold=700,10,10"]).gc_threshold == (700, 10, 10)
