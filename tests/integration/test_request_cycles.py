"""A handled request leaves no reference cycle behind: its context, request and answer are freed with their last
reference once the answer is sent, not at the next full garbage collection (which `kafkite serve`'s gc freeze makes
rare: kafkite.gc_freeze). Found by a soak: every acknowledged Produce on disk (its answer waits for the fsync) left
29 objects in a cycle, the request's context holding the wait, a closure that holds the context, so a broker's
memory grew between two full collections with the requests it had answered."""
from __future__ import annotations

import collections
import gc

import pytest

from kafkite.server.context import RequestContext
from kafkite.testing.runner import BrokerThread
from kafkite.wire.codec import Request

REQUESTS = 60


def _cycle_garbage(make_requests) -> collections.Counter:
    """Types of the request objects that only the cycle collector would free, after make_requests() with the
    collector off (what a young collection would otherwise collect by chance is kept for this count)."""
    gc.collect()
    gc.disable()
    try:
        make_requests()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable goes to gc.garbage, to be counted
        gc.collect()
        return collections.Counter(type(o).__name__ for o in gc.garbage if isinstance(o, (RequestContext, Request)))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.fixture(scope="module")
def disk_broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("cycles")) as b:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for f in admin.create_topics([NewTopic("cycles", 1, 1)]).values():
            f.result(30)
        yield b


def test_a_produce_that_waits_for_its_fsync_leaves_no_cycle(disk_broker):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": disk_broker.bootstrap_servers, "acks": "all", "linger.ms": 0})
    p.produce("cycles", b"warm-up")
    assert p.flush(30) == 0

    def produce():
        for i in range(REQUESTS):  # one Produce each: flushed before the next record
            p.produce("cycles", b"%d" % i)
            assert p.flush(30) == 0

    assert _cycle_garbage(produce) == {}


def test_commits_and_transactions_leave_no_cycle(disk_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = Consumer({"bootstrap.servers": disk_broker.bootstrap_servers, "group.id": "cycles",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("cycles", 0, 0)])
    tp = Producer({"bootstrap.servers": disk_broker.bootstrap_servers, "transactional.id": "cycles-tx"})
    tp.init_transactions(30)
    c.commit(offsets=[TopicPartition("cycles", 0, 1)], asynchronous=False)

    def commit_and_transact():
        for i in range(REQUESTS // 2):
            c.commit(offsets=[TopicPartition("cycles", 0, i + 2)], asynchronous=False)
            tp.begin_transaction()
            tp.produce("cycles", b"in a transaction")
            tp.send_offsets_to_transaction([TopicPartition("cycles", 0, i)], c.consumer_group_metadata())
            tp.commit_transaction(30)

    try:
        assert _cycle_garbage(commit_and_transact) == {}
    finally:
        c.close()
