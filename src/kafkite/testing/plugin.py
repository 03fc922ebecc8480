"""pytest plugin (registered through the `pytest11` entry point): Kafkite fixtures.

- `kafka_bootstrap`: a single in-memory broker on a random port, for one test;
  the value is its bootstrap string, e.g. "127.0.0.1:40123".
- `kafkite_broker`: the same, as the `BrokerThread` object.
- `kafkite_broker_process`: a single in-memory broker in a child process (`BrokerProcess`), for
  clients that block in C while holding the GIL (confluent-kafka group consumers: see
  kafkite.testing.process); `.bootstrap_servers` as above.
- `kafkite_cluster`: a 3-broker in-process `KafkiteCluster` (stop/start brokers, move leaders,
  inject errors and latency).
- `kafkite_secured_broker`: a secured broker (`SecuredBroker` from kafkite.testing.secured, in a child process):
  SASL_SSL with SCRAM-SHA-512 and SSL with required client certificates, a trustme CA, ACLs on, the super user
  `admin` and the ordinary user `alice`; `.confluent()`, `.kafka_python()`, `.aiokafka()`, `.kafkajs()`,
  `.java()`, `.kcat_args()`, `.spark()` hand out each client's config (`listener="SSL"` for the certificate).
- `kafkite_zookeeper`: a standalone ZooKeeper on a free port for the test session (`ZooKeeperServer`
  from kafkite.testing.zookeeper; skipped where ZooKeeper is not installed).

In-process brokers speak the protocol through kafka-python's message classes, which load their
JSON schemas with `importlib.resources.read_text` (deprecated on Python 3.11/3.12): one
DeprecationWarning per schema, plus the `open_text` one `read_text` raises inside importlib.
Those are kafka-python's, not the user's, so the plugin ignores DeprecationWarnings raised in
kafka's own modules and that nested `open_text` one (raised in importlib's legacy module, always on
behalf of a `read_text` call that is reported, or ignored, on its own); a user's own deprecated
calls still show. Filters given with `-W` or `@pytest.mark.filterwarnings` take precedence.
"""
from __future__ import annotations

import pytest

WARNING_FILTERS = (
    r"ignore::DeprecationWarning:kafka(\..*)?$",
    r"ignore:open_text is deprecated:DeprecationWarning:importlib\.resources\._legacy$",
)


def pytest_configure(config: pytest.Config) -> None:
    for line in WARNING_FILTERS:
        config.addinivalue_line("filterwarnings", line)


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


@pytest.fixture
def kafkite_secured_broker():
    pytest.importorskip("trustme", reason="trustme is not installed (pip install trustme)")
    from .secured import SecuredBroker
    with SecuredBroker() as b:
        yield b


@pytest.fixture(scope="session")
def kafkite_zookeeper():
    """A standalone ZooKeeper (Debian's `zookeeper` package) on a free port for the test session, its data dir
    temporary; skipped where ZooKeeper or java is not installed. `.connect_string`, `.chroot(path)`."""
    from .zookeeper import ZooKeeperServer, missing
    why = missing()
    if why:
        pytest.skip(why)
    with ZooKeeperServer() as zk:
        yield zk
