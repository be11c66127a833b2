"""Beam's Python SDK worker pool for an EXTERNAL environment on a multi-TaskManager cluster.

Run it beside the Flink cluster and submit with ``--environment_type=EXTERNAL
--environment_config=127.0.0.1:PORT``; each TaskManager then asks this pool for its SDK
workers (one per TaskManager and environment, or ``--sdk_worker_parallelism`` of them).

Why not Beam's own ``apache_beam.runners.worker.worker_pool_main`` (nor LOOPBACK, which runs
that pool inside the submitting process): it keys workers by worker id, but every
TaskManager JVM numbers its workers from ``1-1`` (a static counter of the runner's
``DefaultJobBundleFactory``), and so does every new job. When TaskManager 1 releases its
worker ``1-1``, that pool stops whichever ``1-1`` it registered last, often TaskManager 2's,
whose running bundle then fails with "SDK harness closed connection" and the job restarts.
Measured on the 2-TaskManager cluster of ``cluster.sh`` with LOOPBACK at parallelism 2:
two restarts in a 6-element job, and duplicated side effects.

This pool keeps every worker it starts. The runner closes a worker's control stream
before it sends ``StopWorker`` (``ExternalEnvironmentFactory``'s ``close``), and a worker
ends by itself when its control stream ends; so each worker here ends that way and then
leaves the pool's list, and ``StopWorker`` never stops a live worker. The pool also
listens on 127.0.0.1 only, starts worker processes with this interpreter (Beam's pool runs
whatever ``python`` is on ``PATH``), and gives the workers a state cache size (Beam's pool
has no flag for it, and an EXTERNAL worker does not read the pipeline's
``--max_cache_memory_usage_mb``).

    python infra/flink/worker_pool.py --service_port=PORT [--threads]
        [--max_cache_memory_usage_mb=N] [--gc-threshold=G0,G1,G2]

It also starts each worker process with the garbage collector's thresholds raised
(`GC_THRESHOLD`), which Beam's pool leaves at Python's own.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from apache_beam.runners.worker import sdk_worker

_LOGGER = logging.getLogger(__name__)

# What a worker process runs: one SDK harness, connected to its TaskManager's control
# endpoint (arguments: control url, worker id, state cache bytes, data buffer time limit,
# the collector's thresholds or "" for Python's own).
_HARNESS_MAIN = (
    "import gc, logging, sys\n"
    "if sys.argv[5]:\n"
    "    gc.set_threshold(*map(int, sys.argv[5].split(',')))\n"
    "from apache_beam.runners.worker.sdk_worker import SdkHarness\n"
    "logging.basicConfig(level=logging.WARNING)\n"
    "SdkHarness(sys.argv[1], worker_id=sys.argv[2], state_cache_size=int(sys.argv[3]),\n"
    "           data_buffer_time_limit_ms=int(sys.argv[4])).run()\n"
)


@dataclass
class _Worker:
    """One SDK harness this pool started: a thread of this process, or a child process."""

    worker_id: str
    control_url: str
    process: subprocess.Popen[bytes] | None = None


class WorkerPool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    """Starts SDK harnesses on request; safe when several runners reuse a worker id."""

    def __init__(
        self,
        *,
        use_process: bool,
        state_cache_bytes: int,
        data_buffer_time_limit_ms: int = 0,
        gc_threshold: tuple[int, int, int] | None = None,
    ) -> None:
        self._use_process = use_process
        self._gc_threshold = gc_threshold
        self._state_cache_bytes = state_cache_bytes
        self._data_buffer_time_limit_ms = data_buffer_time_limit_ms
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()

    def StartWorker(
        self, request: beam_fn_api_pb2.StartWorkerRequest, context: Any
    ) -> beam_fn_api_pb2.StartWorkerResponse:
        url = request.control_endpoint.url
        worker = _Worker(request.worker_id, url)
        try:
            if self._use_process:
                worker.process = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        _HARNESS_MAIN,
                        url,
                        request.worker_id,
                        str(self._state_cache_bytes),
                        str(self._data_buffer_time_limit_ms),
                        ",".join(map(str, self._gc_threshold or ())),
                    ],
                    stdin=subprocess.DEVNULL,
                )
                run: Callable[[], object] = worker.process.wait
            else:
                run = sdk_worker.SdkHarness(
                    url,
                    worker_id=request.worker_id,
                    state_cache_size=self._state_cache_bytes,
                    data_buffer_time_limit_ms=self._data_buffer_time_limit_ms,
                ).run
        except (OSError, ValueError) as e:
            _LOGGER.exception("cannot start worker %s for %s", request.worker_id, url)
            return beam_fn_api_pb2.StartWorkerResponse(error=f"{type(e).__name__}: {e}")
        with self._lock:
            self._workers.append(worker)
        # A thread per worker: the harness itself, or one that waits for its process.
        threading.Thread(
            target=self._run_until_ended,
            args=(worker, run),
            name=f"sdk-worker-{request.worker_id}",
            daemon=True,
        ).start()
        _LOGGER.info("started worker %s for %s", request.worker_id, url)
        return beam_fn_api_pb2.StartWorkerResponse()

    def _run_until_ended(self, worker: _Worker, run: Callable[[], object]) -> None:
        try:
            run()
        finally:
            with self._lock:
                self._workers.remove(worker)

    def StopWorker(
        self, request: beam_fn_api_pb2.StopWorkerRequest, context: Any
    ) -> beam_fn_api_pb2.StopWorkerResponse:
        # The runner has closed this worker's control stream already, so the worker is
        # ending by itself (and leaves the list when it has). The id alone cannot tell it
        # from another TaskManager's live worker of the same id: stop nothing.
        _LOGGER.debug("worker %s released", request.worker_id)
        return beam_fn_api_pb2.StopWorkerResponse()

    def live_workers(self) -> int:
        with self._lock:
            return len(self._workers)

    def stop_all(self, timeout_s: float = 10.0) -> None:
        """Terminate worker processes that are still running (threads end with their runner)."""
        with self._lock:
            processes = [w.process for w in self._workers if w.process is not None]
        for proc in processes:
            if proc.poll() is None:
                proc.terminate()
        for proc in processes:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def serve(
    port: int = 0,
    *,
    use_process: bool = True,
    max_cache_memory_usage_mb: int = 0,
    data_buffer_time_limit_ms: int = 0,
    gc_threshold: tuple[int, int, int] | None = None,
) -> tuple[str, grpc.Server, WorkerPool]:
    """Start a pool on 127.0.0.1:``port`` (0: a free port); returns its address."""
    if gc_threshold is not None and not use_process:
        gc.set_threshold(*gc_threshold)  # threads share this process's collector
    pool = WorkerPool(
        use_process=use_process,
        state_cache_bytes=max_cache_memory_usage_mb << 20,
        data_buffer_time_limit_ms=data_buffer_time_limit_ms,
        gc_threshold=gc_threshold,
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="worker-pool"),
        options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)],
    )
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.start()
    address = f"127.0.0.1:{bound}"
    _LOGGER.info("worker pool listening on %s", address)
    return address, server, pool


def _gc_threshold(text: str) -> tuple[int, int, int]:
    try:
        g0, g1, g2 = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"three integers G0,G1,G2, got {text!r}") from None
    if min(g0, g1, g2) < 1:
        raise argparse.ArgumentTypeError(f"thresholds must be >= 1, got {text!r}")
    return g0, g1, g2


GC_THRESHOLD = (50_000, 20, 100)
"""The worker processes' collector thresholds unless `--gc-threshold` says otherwise.
Python's own (700, 10, 10) collect the young objects every 700 allocations, and a
worker's elements, bundles and cached state survive enough of those collections to fill
the oldest generation, which was then walked whole every few seconds, collecting nothing:
12–20 s of collections in a worker's three minutes of a million-URL bench run, against
2.6–3.2 s with these (docs/results/beam.md, "The SDK workers' garbage collector")."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--service_port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument(
        "--threads",
        action="store_true",
        help="run workers as threads of this process (GIL-bound; default: one process each)",
    )
    parser.add_argument(
        "--max_cache_memory_usage_mb",
        type=int,
        default=0,
        help="SDK state cache per worker, MB (0: off, Beam's default)",
    )
    parser.add_argument(
        "--gc-threshold",
        type=_gc_threshold,
        default=GC_THRESHOLD,
        metavar="G0,G1,G2",
        help="the worker processes' garbage-collector thresholds (gc.set_threshold); "
        f"default: {','.join(map(str, GC_THRESHOLD))} (Python's own: 700,10,10)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    address, server, pool = serve(
        args.service_port,
        use_process=not args.threads,
        max_cache_memory_usage_mb=args.max_cache_memory_usage_mb,
        gc_threshold=args.gc_threshold,
    )
    print(address, flush=True)
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    server.stop(grace=None)
    pool.stop_all()


if __name__ == "__main__":
    main()
