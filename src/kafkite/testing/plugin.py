"""pytest plugin (registered through the `pytest11` entry point): Kafkite fixtures.

- `kafka_bootstrap`: a single in-memory broker on a random port, for one test;
  the value is its bootstrap string, e.g. "127.0.0.1:40123".
- `kafkite_broker`: the same, as the `BrokerThread` object.
- `kafkite_broker_process`: a single in-memory broker in a child process (`BrokerProcess`), for
  clients that block in C while holding the GIL (confluent-kafka group consumers: see
  kafkite.testing.process); `.bootstrap_servers` as above.
- `kafkite_cluster`: a 3-broker in-process `KafkiteCluster` (stop/start brokers, move leaders,
  inject errors and latency).
"""
from __future__ import annotations

import pytest


@pytest.fixture
def kafkite_broker():
    from .runner import BrokerThread
    with BrokerThread() as b:
        yield b


@pytest.fixture
def kafka_bootstrap(kafkite_broker) -> str:
    return kafkite_broker.bootstrap_servers


@pytest.fixture
def kafkite_broker_process():
    from .process import BrokerProcess
    with BrokerProcess() as b:
        yield b


@pytest.fixture
def kafkite_cluster():
    from .cluster import KafkiteCluster
    with KafkiteCluster(brokers=3) as c:
        yield c
