"""Produce/consume helpers over the Python clients, returning comparable records.

A record is (partition, offset, timestamp_ms, key, value, headers) with headers a
tuple of (str, bytes) pairs.
"""
from __future__ import annotations

import asyncio
import os
import time


def make_records(n: int, prefix: str = "k", with_headers: bool = True):
    """n (key, value, headers) triples; values vary in size and content."""
    out = []
    for i in range(n):
        key = f"{prefix}-{i % 97}".encode()
        value = (f"value-{i}-" + "x" * (i % 50)).encode()
        headers = [("h", str(i).encode()), ("src", prefix.encode())] if with_headers else []
        out.append((key, value, headers))
    return out


def wait_until(pred, timeout=30.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


# -- kafka-python ---------------------------------------------------------------
def kp_group_consumer(topic: str, timeout: float = 30.0, **config):
    """A kafka-python group consumer subscribed to `topic` once it knows the topic's partitions. Subscribing
    first lets its first assignment be made without them; the leader then rejoins, and kafka-python 3.0.12
    sometimes drops that rejoin's SyncGroup answer (join_group_async's loop ends as soon as need_rejoin() turns
    False, leaving the finished join task unread: the member stays REBALANCING with no partitions until the
    broker expires it). Reproduced with two consumers of a new topic: 7 of 15 rounds stuck, 0 of 15 this way."""
    from kafka import KafkaConsumer
    c = KafkaConsumer(**config)
    try:
        wait_until(lambda: c.partitions_for_topic(topic), timeout, what=f"kafka-python to know {topic}")
    except BaseException:
        c.close()
        raise
    c.subscribe([topic])
    return c


def ck_commit(consumer, timeout: float = 30.0) -> None:
    """A confluent-kafka consumer's synchronous commit of what it read, with STALE_MEMBER_EPOCH retried as
    librdkafka's documentation of rd_kafka_commit says it may be (group.protocol=consumer): a commit that left with
    the member's epoch while a heartbeat moved the member to a new one (partitions added to its assignment) is
    refused, as Kafka's validateMemberEpoch refuses it; librdkafka hands a manual commit's refusal to the
    application after hastening its next heartbeat, and the next commit carries the new epoch."""
    from confluent_kafka import KafkaError, KafkaException
    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or time.monotonic() > deadline:
                raise
        time.sleep(0.05)  # (the heartbeat runs on librdkafka's own thread)


def kp_poll_until_assigned(c, timeout: float = 30.0) -> list:
    """Poll a kafka-python group consumer until it holds partitions; returns the records it read meanwhile."""
    got = []

    def assigned():
        got.extend(r for rs in c.poll(timeout_ms=200).values() for r in rs)
        return bool(c.assignment())
    wait_until(assigned, timeout, interval=0, what="kafka-python's group assignment")
    return got


def kp_read(c, want: int, timeout: float = 30.0, settle_ms: int = 200) -> list:
    """The records an assigned kafka-python consumer reads: polled until `want` came (or `timeout` passed), then
    once more for `settle_ms`, so that a surplus shows too. For a read of everything there is, in place of an
    idle timeout (consumer_timeout_ms), which on a loaded machine can end before the first fetch came back."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += [r for rs in c.poll(timeout_ms=200).values() for r in rs]
    got += [r for rs in c.poll(timeout_ms=settle_ms).values() for r in rs]
    return got


def kp_produce(bootstrap, topic, records, compression=None, acks="all", partition=None):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, compression_type=compression, linger_ms=5)
    futs = [p.send(topic, key=k, value=v, headers=h, partition=partition) for k, v, h in records]
    p.flush()
    metas = [f.get(timeout=30) for f in futs]
    p.close()
    return metas


def kp_consume_all(bootstrap, topic, expected, timeout=60.0):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    parts = c.partitions_for_topic(topic) or wait_until(lambda: c.partitions_for_topic(topic), what="partitions")
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for tp, msgs in c.poll(timeout_ms=500).items():
            for m in msgs:
                out.append((m.partition, m.offset, m.timestamp, m.key, m.value,
                            tuple((k, bytes(v)) for k, v in (m.headers or []))))
    c.close()
    return out


# -- confluent-kafka --------------------------------------------------------------
def ck_produce(bootstrap, topic, records, compression="none", extra=None):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5, "acks": "all"}
    conf.update(extra or {})
    p = Producer(conf)
    errors = []
    delivered = []

    def cb(err, msg):
        if err:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))
    for k, v, h in records:
        while True:
            try:
                p.produce(topic, key=k, value=v, headers=h, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    remaining = p.flush(60)
    assert remaining == 0 and not errors, (remaining, errors[:3])
    return delivered


def ck_consume_all(bootstrap, topic, expected, timeout=60.0):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign", "enable.auto.commit": False,
                  "enable.partition.eof": False})
    md = c.list_topics(topic, timeout=30)
    parts = sorted(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for m in c.consume(1000, timeout=0.5):
            if m.error():
                raise AssertionError(str(m.error()))
            out.append((m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                        tuple((k, bytes(v)) for k, v in (m.headers() or []))))
    c.close()
    return out


# -- aiokafka -------------------------------------------------------------------------
def aio_produce(bootstrap, topic, records, compression=None):
    async def run():
        from aiokafka import AIOKafkaProducer
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, acks="all", linger_ms=5)
        await p.start()
        try:
            futs = [await p.send(topic, key=k, value=v, headers=h) for k, v, h in records]
            return [await f for f in futs]
        finally:
            await p.stop()
    return asyncio.run(run())


def aio_consume_all(bootstrap, topic, expected, timeout=60.0):
    async def run():
        from aiokafka import AIOKafkaConsumer, TopicPartition
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            parts = c.partitions_for_topic(topic)
            if not parts:
                await c._client.force_metadata_update()  # noqa: SLF001 - aiokafka has no public refresh
                parts = c.partitions_for_topic(topic)
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            out = []
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for tp, msgs in batch.items():
                    for m in msgs:
                        out.append((m.partition, m.offset, m.timestamp, m.key, m.value,
                                    tuple((k, bytes(v)) for k, v in (m.headers or []))))
            return out
        finally:
            await c.stop()
    return asyncio.run(run())


def by_partition(records):
    """Group consumed records by partition, in offset order; checks offsets increase."""
    out = {}
    for r in sorted(records, key=lambda r: (r[0], r[1])):
        out.setdefault(r[0], []).append(r)
    return out


def payloads(records):
    """Sort-independent view: the multiset of (key, value, headers)."""
    return sorted((r[3], r[4], r[5]) for r in records)


def expected_payloads(records):
    return sorted((k, v, tuple(h)) for k, v, h in records)


def start_serve(*args: str, cwd=None):
    """`kafkite serve --port 0 ARGS` as a process; returns (process, bootstrap) once it logged its ready line."""
    from kafkite.testing.process import spawn_serve
    return spawn_serve(list(args), cwd=cwd, timeout=30)


class OnTheLoop:
    """Records each call of `owner.name` (default os.fsync) made on a Trio event loop, not in a worker thread."""

    def __init__(self, monkeypatch, owner=os, name: str = "fsync"):
        self.monkeypatch, self.owner, self.name, self.stacks = monkeypatch, owner, name, []
        self.real = getattr(owner, name)

    def __enter__(self):
        import functools
        import traceback
        import trio
        real = self.real

        @functools.wraps(real)
        def recording(*args, **kwargs):
            try:
                trio.lowlevel.current_task()
            except RuntimeError:  # a worker thread (or not Trio at all)
                pass
            else:
                self.stacks.append("".join(traceback.format_stack(limit=6)))
            return real(*args, **kwargs)
        self.monkeypatch.setattr(self.owner, self.name, recording)
        return self

    def __exit__(self, *exc):
        self.monkeypatch.setattr(self.owner, self.name, self.real)

    def check(self, most: int) -> None:
        assert len(self.stacks) <= most, (f"{len(self.stacks)} calls of {self.name} on the event loop, the first:\n"
                                          + "".join(self.stacks[:2]))
