"""Beam on a real Flink session cluster: a JobManager and two TaskManagers (two slots each),
separate JVMs started by ``infra/flink/cluster.sh`` (fixture ``flink_cluster``).

The bounded replay submitted with ``--flink_master=127.0.0.1:PORT`` equals the embedded
engine (the comparison of ``test_beam_replay.py``) at parallelism 1 and 2, and the job
really ran there: the cluster lists it as finished without a task failure, at that
parallelism, on as many TaskManagers. Last, the scripts a fault test needs: a TaskManager
killed with SIGKILL and a fresh one started in its place leave a cluster of two
TaskManagers and four slots; and a file of extra options (``FLINK_CLUSTER_EXTRA_CONF``) may
not set one the script sets.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from flink_cluster import CLUSTER, FlinkCluster
from polling import wait_for

# A killed TaskManager is dropped when the JobManager's heartbeat to it times out
# (heartbeat.timeout: 10 s in cluster.sh's config) or sooner, when its RPC connection drops.
TASKMANAGER_GONE_S = 60


def _new_job(cluster: FlinkCluster, before: dict[str, str]) -> str:
    new = {jid: state for jid, state in cluster.jobs().items() if jid not in before}
    assert len(new) == 1, f"expected one new job on the cluster, found {new}"
    ((jid, state),) = new.items()
    assert state == "FINISHED"
    return jid


@pytest.mark.beam_runner
@pytest.mark.parametrize("parallelism", [1, 2])
def test_cluster_replay_equals_embedded(
    beam_replay_case: Any,
    tmp_path: Path,
    parallelism: int,
    flink_cluster: FlinkCluster,
    flink_worker_pool: str,
) -> None:
    before = flink_cluster.jobs()
    args = flink_cluster.beam_args(flink_worker_pool, parallelism)
    beam_replay_case.check_equal(tmp_path, "ieca", args)

    jid = _new_job(flink_cluster, before)
    # ... and ran through without a task failure (a restart would hide one)
    history = flink_cluster.rest(f"/jobs/{jid}/exceptions")["exceptionHistory"]["entries"]
    assert history == []
    vertices = flink_cluster.rest(f"/jobs/{jid}")["vertices"]
    assert max(v["parallelism"] for v in vertices) == parallelism
    # cluster.evenly-spread-out-slots: a job of parallelism 2 runs on both TaskManagers
    used: set[str] = set()
    for vertex in vertices:
        placement = flink_cluster.rest(f"/jobs/{jid}/vertices/{vertex['id']}/taskmanagers")
        used |= {tm["taskmanager-id"] for tm in placement["taskmanagers"]}
    assert len(used) == parallelism


@pytest.mark.beam_runner
def test_cluster_replaces_a_killed_taskmanager(flink_cluster: FlinkCluster) -> None:
    ids_before = {tm["id"] for tm in flink_cluster.rest("/taskmanagers")["taskmanagers"]}
    flink_cluster.kill_taskmanager(2)
    wait_for(
        lambda: flink_cluster.rest("/overview")["taskmanagers"] == 1,
        "the killed TaskManager to be dropped",
        TASKMANAGER_GONE_S,
        interval_s=0.5,
    )

    flink_cluster.start_taskmanager(2)  # returns once it has registered
    overview = flink_cluster.rest("/overview")
    assert (overview["taskmanagers"], overview["slots-total"]) == (2, 4)
    ids_after = {tm["id"] for tm in flink_cluster.rest("/taskmanagers")["taskmanagers"]}
    assert len(ids_after & ids_before) == 1  # TaskManager 1, and a new TaskManager 2
    flink_cluster.run("status")  # fails unless every process it started is running


def test_extra_conf_may_not_set_what_the_script_sets(tmp_path: Path) -> None:
    """FLINK_CLUSTER_EXTRA_CONF adds Flink options; one the script sets itself (here the
    state backend, which has its own variable) is refused before any process starts."""
    extra = tmp_path / "extra.yaml"
    extra.write_text("state.backend.rocksdb.thread.num: 2\nstate.backend.type: hashmap\n")
    cluster_dir = tmp_path / "cluster"
    env = {
        **os.environ,
        "FLINK_CLUSTER_DIR": str(cluster_dir),
        "FLINK_CLUSTER_EXTRA_CONF": str(extra),
    }
    proc = subprocess.run(
        ["bash", str(CLUSTER), "start"], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode != 0
    assert "FLINK_CLUSTER_EXTRA_CONF sets state.backend.type" in proc.stderr
    assert "thread.num" not in proc.stderr
    assert not list((cluster_dir / "pids").glob("*.pid"))
    assert not (cluster_dir / "conf" / "config.yaml").exists()
