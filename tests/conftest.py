"""Shared pytest setup.

tests/ is not a package; pytest (rootdir-based, "prepend" import mode) puts this folder on
sys.path before importing this conftest, so the plugin module tests/kafka_broker.py is
importable by its bare name.
"""

import pytest

# Session fixtures: a real Kafka broker (infra/kafka), Beam's runners (infra/prism and
# infra/flink), and a standalone Flink session cluster (infra/flink/cluster.sh).
pytest_plugins = ["kafka_broker", "beam_runners", "flink_cluster"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: needs the real broker from infra/kafka")
