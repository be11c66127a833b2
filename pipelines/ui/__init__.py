"""The operator's page of a running job: a bounded summary the engine keeps per step
(`summary.py`) and a read-only HTTP server with one HTML page and JSON endpoints
(`server.py`, the page in `static/`). `frontierflow run --ui-port PORT` and `replay` turn
it on."""

from __future__ import annotations

from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.ui.server import UiServer
from frontierflow.pipelines.ui.summary import LiveSummary, SummarySettings


def start_page(
    command: str,
    strategy: Strategy[object],
    port: int,
    host: str = "127.0.0.1",
    settings: SummarySettings | None = None,
) -> tuple[LiveSummary, UiServer]:
    """A summary for `strategy`'s job and the server showing it, started."""
    summary = LiveSummary(
        command=command,
        strategy=strategy.name,
        judges_pages=strategy.judges_pages,
        settings=settings,
    )
    return summary, UiServer(summary, port, host).start()


__all__ = ["LiveSummary", "SummarySettings", "UiServer", "start_page"]
