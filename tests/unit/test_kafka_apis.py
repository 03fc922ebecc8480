"""The request handler object (server/kafka_apis.py): every routed handler takes (apis, ctx), no handler reaches
through the broker, and authorization has its one call site there."""
import inspect
import re
from pathlib import Path

from kafkite.security.authorizer import Authorizer, Op, ResourceType
from kafkite.server import router
from kafkite.server.context import RequestContext
from kafkite.server.kafka_apis import KafkaApis

HANDLERS = Path(router.__file__).with_name("handlers")


def test_every_route_takes_the_request_handler_and_the_context():
    for table in (router.ROUTES, router.INTER_BROKER_ROUTES):
        for key, (_lo, _hi, handler) in table.items():
            assert list(inspect.signature(handler).parameters)[:2] == ["apis", "ctx"], (key, handler)


def test_no_handler_reaches_through_the_broker_or_authorizes_on_its_own():
    for path in sorted(HANDLERS.glob("*.py")):
        src = path.read_text()
        assert "ctx.broker" not in src, path.name
        assert not re.search(r"\bctx\.authoriz", src), path.name
        # the broker epoch (set when a ZooKeeper-mode broker registers) is the one field read from the broker
        assert set(re.findall(r"apis\.broker\.(\w+)", src)) <= {"broker_epoch"}, path.name


class _Req:
    api_name, api_version, correlation_id, client_id = "Metadata", 12, 1, "t"


class _Log:
    def __init__(self):
        self.lines = []

    def bind(self, **kw):
        return self

    def info(self, event, **kw):
        self.lines.append((event, kw))


def _apis(authorizer) -> KafkaApis:
    apis = KafkaApis.__new__(KafkaApis)  # only the authorizer is read by the AuthHelper methods
    apis.authorizer = authorizer
    return apis


def test_authorization_is_checked_on_the_request_handler():
    log = _Log()
    ctx = RequestContext(None, _Req(), "10.0.0.1:5000", conn_log=log, principal="User:alice")
    auth = Authorizer(allow_if_no_acl=False)
    apis = _apis(auth)
    assert apis.authorizing(ctx)
    assert not apis.authorized(ctx, Op.READ, ResourceType.TOPIC, "t")
    assert log.lines == [("authorizer.denied", {"principal": "User:alice", "host": "10.0.0.1", "operation": "READ",
                                                "resource_type": "TOPIC", "name": "t"})]
    assert apis.authorize(ctx, Op.READ, ResourceType.TOPIC, ["t", "u"]) == set()
    assert not apis.authorized_cluster(ctx, Op.CREATE, log_denied=False)
    assert len(log.lines) == 3  # the set's two names; the cluster check was not logged
    # no authorizer, or the inter-broker listener: everything is allowed
    assert _apis(None).authorize(ctx, Op.READ, ResourceType.TOPIC, ["t"]) == {"t"}
    broker_ctx = RequestContext(None, _Req(), "10.0.0.2:5000", inter_broker=True)
    assert not apis.authorizing(broker_ctx) and apis.authorized(broker_ctx, Op.ALTER, ResourceType.TOPIC, "t")
