"""Produce and consume with the Python clients: every codec, keys, headers, timestamps, order."""
from __future__ import annotations

import pytest

from helpers import (aio_consume_all, aio_produce, by_partition, ck_consume_all, ck_produce, expected_payloads,
                     kp_consume_all, kp_produce, make_records, payloads)

N = 10_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap, name, partitions=3):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    a.create_topics([NewTopic(name, partitions, 1)])
    a.close()


def check_order(consumed):
    for p, recs in by_partition(consumed).items():
        offs = [r[1] for r in recs]
        assert offs == list(range(offs[0], offs[0] + len(offs))), f"gap or duplicate in partition {p}"


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(broker, codec):
    bs = broker.bootstrap_servers
    create_topic(bs, f"kp-{codec}")
    recs = make_records(N, prefix=f"kp{codec}")
    metas = kp_produce(bs, f"kp-{codec}", recs, compression=None if codec == "none" else codec)
    got = kp_consume_all(bs, f"kp-{codec}", N)
    assert len(got) == N
    assert payloads(got) == expected_payloads(recs)
    check_order(got)
    produced_ts = {(m.partition, m.offset): m.timestamp for m in metas}
    assert {(r[0], r[1]): r[2] for r in got} == produced_ts
    # per-key order is kept (same key -> same partition, in send order)
    seen = {}
    for r in sorted(got, key=lambda r: (r[0], r[1])):
        seen.setdefault(r[3], []).append(int(r[5][0][1]))
    assert all(v == sorted(v) for v in seen.values())


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_roundtrip(broker, codec):
    bs = broker.bootstrap_servers
    create_topic(bs, f"ck-{codec}")
    recs = make_records(N, prefix=f"ck{codec}")
    ck_produce(bs, f"ck-{codec}", recs, compression=codec)
    got = ck_consume_all(bs, f"ck-{codec}", N)
    assert len(got) == N
    assert payloads(got) == expected_payloads(recs)
    check_order(got)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_roundtrip(broker, codec):
    bs = broker.bootstrap_servers
    create_topic(bs, f"aio-{codec}")
    recs = make_records(N, prefix=f"aio{codec}")
    aio_produce(bs, f"aio-{codec}", recs, compression=None if codec == "none" else codec)
    got = aio_consume_all(bs, f"aio-{codec}", N)
    assert payloads(got) == expected_payloads(recs)
    check_order(got)


def test_cross_client(broker):
    """Records produced by one client are read identically by every other."""
    bs = broker.bootstrap_servers
    producers = {
        "kp": lambda t, r: kp_produce(bs, t, r, compression="lz4"),
        "ck": lambda t, r: ck_produce(bs, t, r, compression="zstd"),
        "aio": lambda t, r: aio_produce(bs, t, r, compression="gzip"),
    }
    consumers = {"kp": kp_consume_all, "ck": ck_consume_all, "aio": aio_consume_all}
    for pname, produce in producers.items():
        topic = f"x-{pname}"
        create_topic(bs, topic)
        recs = make_records(1_000, prefix=pname)
        produce(topic, recs)
        views = {cname: sorted(consume(bs, topic, 1_000)) for cname, consume in consumers.items()}
        first = views["kp"]
        assert len(first) == 1_000
        assert payloads(first) == expected_payloads(recs)
        for cname, view in views.items():
            assert view == first, f"{cname} reads {pname}'s records differently"


def test_auto_create_on_produce(broker):
    bs = broker.bootstrap_servers
    kp_produce(bs, "auto-produce", make_records(10))
    assert len(kp_consume_all(bs, "auto-produce", 10)) == 10


def test_large_produce_requests_keep_every_byte(broker, monkeypatch):
    """A Produce request above 64 KiB is read from the socket into a buffer of its own, and the buffers are used again
    (wire/frame.py FrameBuffers) once nothing holds a view of them: 3,000 records of 1 KiB random bytes sent in
    requests of up to ~1 MB to 3 partitions come back byte for byte."""
    import os
    from kafkite.wire.frame import FrameReader
    received_into = []
    frame_buffer = FrameReader.frame_buffer
    monkeypatch.setattr(FrameReader, "frame_buffer", lambda self: received_into.append(1) or frame_buffer(self))
    bs = broker.bootstrap_servers
    create_topic(bs, "big-requests")
    recs = [(b"%d" % i, os.urandom(1024), []) for i in range(3000)]
    ck_produce(bs, "big-requests", recs, extra={"linger.ms": 100, "batch.size": 1000000})
    got = ck_consume_all(bs, "big-requests", len(recs))
    assert payloads(got) == expected_payloads(recs)
    assert received_into  # the large requests took that way
