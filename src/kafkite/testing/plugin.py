"""pytest plugin (registered through the `pytest11` entry point): Kafkite fixtures.

- `kafka_bootstrap`: a single in-memory broker on a random port, for one test;
  the value is its bootstrap string, e.g. "127.0.0.1:40123".
- `kafkite_broker`: the same, as the `BrokerThread` object.
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
