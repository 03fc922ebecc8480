"""kill -9 right after acks=all acknowledgements; restart on the same data dir: nothing acknowledged is lost."""
from __future__ import annotations

import os
import signal

from helpers import ck_consume_all, ck_produce, make_records, start_serve


def start(data_dir):
    return start_serve("--data-dir", str(data_dir))


def test_kill9_keeps_acknowledged_records(tmp_path):
    data = tmp_path / "data"
    proc, bs = start(data)
    try:
        from kafka.admin import KafkaAdminClient, NewTopic
        a = KafkaAdminClient(bootstrap_servers=bs)
        a.create_topics([NewTopic("durable", 3, 1)])
        a.close()
        recs = make_records(5_000, prefix="d")
        delivered = ck_produce(bs, "durable", recs, compression="lz4")  # acks=all, all acknowledged
        assert len(delivered) == 5_000
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    proc, bs = start(data)
    try:
        got = ck_consume_all(bs, "durable", 5_000)
        assert sorted((p, o) for p, o, *_ in got) == sorted(delivered)
        more = ck_produce(bs, "durable", make_records(300, prefix="e"))
        # offsets continue without gaps after recovery
        per_part = {}
        for p, o in delivered + more:
            per_part.setdefault(p, []).append(o)
        for p, offs in per_part.items():
            assert sorted(offs) == list(range(len(offs))), f"gap in partition {p}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
