"""The fetcher's Prometheus metrics, in a registry of its own (like the live job's)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class FetcherMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.pages = Counter(
            "frontierflow_fetcher_pages",
            "FetchEvents published, by status class (2xx ... 5xx, error, answered)",
            ["status_class"],
            registry=r,
        )
        self.errors = Counter(
            "frontierflow_fetcher_errors",
            "requests without an HTTP answer, by reason",
            ["reason"],
            registry=r,
        )
        self.bytes = Counter("frontierflow_fetcher_bytes", "body bytes read", registry=r)
        self.fetch_seconds = Histogram(
            "frontierflow_fetcher_fetch_seconds", "time per page request", registry=r
        )
        self.queued = Gauge("frontierflow_fetcher_queued", "frontier entries queued", registry=r)
        self.in_flight = Gauge("frontierflow_fetcher_in_flight", "requests in flight", registry=r)
        self.workers = Gauge("frontierflow_fetcher_workers", "concurrent fetch workers", registry=r)
        self.decisions = Counter(
            "frontierflow_fetcher_scaling_decisions",
            "ScalingDecisions for this fetcher applied",
            registry=r,
        )
        self.dead = Counter(
            "frontierflow_fetcher_dead_letters",
            "frontier records sent to dead-letter",
            ["error_class"],
            registry=r,
        )
        self.pauses = Counter(
            "frontierflow_fetcher_host_pauses",
            "host pauses begun (429, 503, a run of 5xx or transport failures), by reason",
            ["reason"],
            registry=r,
        )
        self.robots = Counter(
            "frontierflow_fetcher_robots_fetches", "robots.txt requests", registry=r
        )
        self.port: int | None = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(server.server_port)
        return self.port


def status_class(status: int) -> str:
    if status == 208:
        return "answered"
    if status < 0:
        return "error"
    return f"{status // 100}xx"
