"""kafka-python's connection settings (`connectors.kafka_settings.CLIENT_SETTINGS`) under
librdkafka's names, for the confluent-kafka backend (`connectors.kafka_confluent`): each
setting mapped, or refused by name with the reason and the way out; never dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frontierflow.connectors.kafka_settings import KafkaSettings

LIBRDKAFKA_NAMES: Mapping[str, str] = {
    "security_protocol": "security.protocol",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_ciphers": "ssl.cipher.suites",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "client_id": "client.id",
    # kafka-python's timeout of one request; librdkafka's default timeout of network requests
    "request_timeout_ms": "socket.timeout.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "retry_backoff_ms": "retry.backoff.ms",
}
"""kafka-python's connection settings and librdkafka's names for the same thing."""

NO_LIBRDKAFKA_EQUIVALENT: Mapping[str, str] = {
    "ssl_context": "librdkafka builds its own TLS context: give ssl_cafile, ssl_certfile, "
    "ssl_keyfile and ssl_password instead",
    "sasl_kerberos_domain_name": "librdkafka takes the Kerberos principal's host from the "
    "broker's address",
    "sasl_oauth_token_provider": "confluent-kafka takes an oauth_cb callback, not a "
    "kafka-python token provider",
    "api_version": "librdkafka asks the broker which protocol versions it speaks",
}
"""Settings kafka-python takes that librdkafka cannot, and why."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def librdkafka_config(settings: KafkaSettings) -> dict[str, Any]:
    """The connection part of a librdkafka configuration for `settings`: the bootstrap
    servers and `settings.client` under librdkafka's names. ValueError for a setting with
    no librdkafka equivalent (`NO_LIBRDKAFKA_EQUIVALENT`), naming it and the way out."""
    config: dict[str, Any] = {"bootstrap.servers": settings.bootstrap_servers}
    for name, value in settings.client.items():
        if name in NO_LIBRDKAFKA_EQUIVALENT:
            raise ValueError(
                f"Kafka client setting {name!r} has no librdkafka equivalent "
                f"({NO_LIBRDKAFKA_EQUIVALENT[name]}); or run with --kafka-client kafka-python"
            )
        if name == "ssl_check_hostname":
            check = _flag(name, value)
            config["ssl.endpoint.identification.algorithm"] = "https" if check else "none"
        elif name in LIBRDKAFKA_NAMES:
            config[LIBRDKAFKA_NAMES[name]] = value
        else:  # KafkaSettings refuses these already; a setting added there lands here
            raise ValueError(f"Kafka client setting {name!r} has no librdkafka mapping")
    return config


def _flag(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"Kafka client setting {name!r} takes true or false, got {value!r}")
