"""Where the broker is, what the topics are called and how to talk to the broker: the
settings every Kafka client of the project takes, and which library it talks through
(`connectors.kafka_python` for kafka-python, `connectors.kafka_confluent` for confluent-kafka;
`connectors.kafka` opens either)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from frontierflow.connectors.kafka_client import KafkaClientName, resolve_client

CLIENT_SETTINGS = frozenset(
    {
        "security_protocol",
        "ssl_context",
        "ssl_check_hostname",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_password",
        "ssl_crlfile",
        "ssl_ciphers",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "sasl_kerberos_service_name",
        "sasl_kerberos_domain_name",
        "sasl_oauth_token_provider",
        "client_id",
        "request_timeout_ms",
        "api_version",
        "connections_max_idle_ms",
        "metadata_max_age_ms",
        "reconnect_backoff_ms",
        "reconnect_backoff_max_ms",
        "retry_backoff_ms",
    }
)
"""Connection settings passed through to every client (TLS, SASL, timeouts), in
kafka-python's names; `connectors.librdkafka_config.librdkafka_config` maps them to
librdkafka's."""


@dataclass(frozen=True, slots=True)
class KafkaTopics:
    """Topic names; every one is configuration."""

    fetch_events: str = "fetch-events"
    frontier: str = "frontier"
    fetcher_control: str = "fetcher-control"
    dead_letter: str = "dead-letter"
    seeds: str = "seeds"
    """Starting pages (SeedRequest, key = URL), read by the job like fetch-events."""
    fetched: str = "fetched"
    """Compacted, written by the fetchers we ship (the reference fetcher, the Scrapy
    adapter): per URL the last download (a FetchEvent without body data), partitioned like
    the frontier, so a fetcher taking over a host knows what was already fetched in the
    cycle."""


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """Where the broker is and how to talk to it.

    `client` holds connection settings (TLS, SASL, timeouts: see `CLIENT_SETTINGS`) in
    kafka-python's names, given unchanged to its consumer, producer and admin client and
    mapped to librdkafka's names for confluent-kafka's. `client_library` is the library
    every reader, writer and admin client of these settings is opened with.
    """

    bootstrap_servers: str
    topics: KafkaTopics = field(default_factory=KafkaTopics)
    client: Mapping[str, Any] = field(default_factory=dict)
    group_id: str = "frontierflow"
    partitions: int = 1
    """Partitions of the topics this job creates when they are missing."""
    replication_factor: int = 1
    client_library: str = "auto"
    """`--kafka-client`: `kafka-python`, `confluent` (librdkafka), or `auto`, confluent
    when it is installed."""

    def __post_init__(self) -> None:
        unknown = set(self.client) - CLIENT_SETTINGS
        if unknown:
            raise ValueError(f"unknown Kafka client settings: {sorted(unknown)}")
        if not self.bootstrap_servers:
            raise ValueError("bootstrap servers are required")
        if self.partitions < 1 or self.replication_factor < 1:
            raise ValueError("partitions and replication factor must be >= 1")
        resolve_client(self.client_library)  # ValueError: unknown, or not installed

    @property
    def library(self) -> KafkaClientName:
        """The library `client_library` stands for (`kafka_client.resolve_client`)."""
        return resolve_client(self.client_library)

    def connection(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers.split(","), **self.client}
