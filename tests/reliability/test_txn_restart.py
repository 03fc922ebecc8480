"""Disk mode: kill -9 during an open transaction. After the restart the transaction coordinator reloads
__transaction_state, the open transaction is aborted once its timeout passes, read_committed readers get past it,
and the aborted-transaction index (.txnindex) and the coordinator's records survive further restarts."""
from __future__ import annotations

import os
import signal

from helpers import start_serve, wait_until
from kafkite.storage.transaction_index import decode_entries

FAST_ABORT = ["--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"]


def start(data_dir):
    return start_serve("--data-dir", str(data_dir), *FAST_ABORT)


def read_committed(bs, n_partitions=1):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "rc", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition("txr", p, 0) for p in range(n_partitions)])
    out, eof = [], set()
    try:
        import time
        deadline = time.monotonic() + 30
        while len(eof) < n_partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF: reached the last stable offset
                    eof.add(m.partition())
                continue
            out.append(m.value())
    finally:
        c.close()
    return out, len(eof) == n_partitions


def txnindex_entries(data_dir):
    files = sorted(data_dir.rglob("txr-0/*.txnindex"))
    return [(e.first_offset, e.last_offset) for f in files for e in decode_entries(f.read_bytes())]


def test_kill9_during_an_open_transaction(tmp_path):
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient, NewTopic
    data = tmp_path / "data"
    proc, bs = start(data)
    try:
        a = KafkaAdminClient(bootstrap_servers=bs)
        a.create_topics([NewTopic("txr", 1, 1)])
        a.close()
        p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-k9", "transaction.timeout.ms": 2000})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce("txr", value=b"c%d" % i, partition=0)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(7):
            p.produce("txr", value=b"open%d" % i, partition=0)
        assert p.flush(10) == 0  # in the log, the transaction still open
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    proc, bs = start(data)
    try:
        # the coordinator reloads tx-k9 as Ongoing; its timeout aborts it; read_committed gets past it
        wait_until(lambda: txnindex_entries(data), timeout=30, what="the timeout's abort marker")
        assert txnindex_entries(data) == [(6, 13)]  # 5 records + marker, then 7 aborted + their marker
        got, done = read_committed(bs)
        assert done and got == [b"c%d" % i for i in range(5)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    proc, bs = start(data)
    try:
        assert txnindex_entries(data) == [(6, 13)]
        got, done = read_committed(bs)
        assert done and got == [b"c%d" % i for i in range(5)]
        p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-k9", "transaction.timeout.ms": 2000})
        p.init_transactions(30)  # the same id, an epoch further: the reloaded state fences the old epoch
        p.begin_transaction()
        p.produce("txr", value=b"after", partition=0)
        p.commit_transaction(30)  # answered once PrepareCommit is durable: the marker follows
        wait_until(lambda: read_committed(bs) == ([b"c%d" % i for i in range(5)] + [b"after"], True),
                   timeout=30, what="the committed record after the aborted transaction")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
