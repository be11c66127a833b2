"""One `frontierflow crawl`, its options checked: what `crawl.py` reads from the command
line and `crawl_run.py` runs (a module of its own, so neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontierflow.connectors.fetcher.settings import FetcherSettings
    from frontierflow.connectors.kafka import KafkaTopics
    from frontierflow.pipelines.core.strategy import Strategy
    from frontierflow.pipelines.speed.settings import ControllerSettings
    from frontierflow.state.relevance import Topic
    from frontierflow.state.revisit_schedule import RevisitPolicy

FETCHER_ID = "crawl-fetcher"


@dataclass(frozen=True, slots=True)
class CrawlSettings:
    """One `frontierflow crawl`, its options checked."""

    seeds: tuple[str, ...]
    """Starting pages sent this run (already-fetched ones change nothing)."""
    state_dir: Path
    strategy: Strategy[Any]
    topic: Topic | None
    """The topic pages are judged against in the report (`--topic`)."""
    crawl_id: str
    fetcher: FetcherSettings
    bootstrap_servers: str | None
    """None: start the local broker, its data under `state_dir/kafka`."""
    topics: KafkaTopics
    kafka_client: dict[str, object]
    """Kafka connection settings (`--kafka`)."""
    client_library: str
    """The Kafka client library of the job, the fetcher and the report (`--kafka-client`)."""
    speed: ControllerSettings | None
    revisit: RevisitPolicy | None
    """When the job asks for a page again (`--revisit`); None: never."""
    step_size: int
    ui_port: int | None
    """None: no operator's page."""
    ui_host: str
    ui_port_fallback: bool
    """The default port was asked for: when it is taken, take a free one."""
    progress_every_s: float

    @property
    def job_dir(self) -> Path:
        return self.state_dir / "job"

    @property
    def broker_dir(self) -> Path:
        return self.state_dir / "kafka"
