"""Transactions (KIP-98) with the stock clients: the Java clients 3.9.1 and 4.3.0 (tests/clients/java/KafkiteDriver.java
txn-produce / txn-ctp / consume-all), confluent-kafka (librdkafka, in process) and kafkajs (tests/clients/js/driver.js
txn-produce / txn-ctp).

Every scenario checks what a read_committed consumer sees (only committed records, in order per partition, and
a position that reaches the log end offset once every transaction is complete: the last stable offset caught
up, control batches skipped) against what a read_uncommitted one sees (everything, aborted records included,
so the aborts are real). Fencing: a second producer with the same transactional id fences the first; an open
transaction of the fenced (or crashed) producer is aborted. Consume-transform-produce: the output read
read_committed holds every input record exactly once, and the group's committed offsets are the input's end.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from clients import drivers
from clients.drivers import decode_records, run_java, run_node, summary

PARTITIONS = 3


# -- helpers ---------------------------------------------------------------------------------------------
def create(bs: str, *topics: str, partitions: int = PARTITIONS) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(t, partitions, 1) for t in topics])
    finally:
        a.close()


def java(*args, **kw) -> list[dict]:
    """run_java, skipping when the compiled driver predates the transaction commands (a stale $KAFKITE_TOOLS)."""
    lines = run_java(*args, **kw)
    last = lines[-1] if lines else {}
    if last.get("error") == "IllegalArgumentException" and "unknown command" in (last.get("message") or ""):
        pytest.skip(f"the compiled Java driver has no {args[0]} command: rerun .ci/install-clients.sh")
    return lines


def java_killed_when_crashing(*args, timeout: float = 180) -> list[dict]:
    """Run the Java driver until it prints {"crashing": true}, then SIGKILL the JVM (a real crash: no shutdown
    hook, no close, nothing flushed after) -> its JSON lines; asserts it died of the signal."""
    import signal
    import subprocess
    drivers.need("java")
    proc = subprocess.Popen(drivers.java_argv(*map(str, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines: list[dict] = []
    try:
        deadline = time.monotonic() + timeout
        for line in proc.stdout:
            if line.startswith("{"):
                lines.append(json.loads(line))
                if lines[-1].get("crashing"):
                    proc.send_signal(signal.SIGKILL)
                    break
            assert time.monotonic() < deadline, f"no crash within {timeout} s: {lines[-3:]}"
        assert proc.wait(30) == -signal.SIGKILL, (proc.returncode, lines[-3:], proc.stderr.read()[-2000:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    return lines


def by_partition(lines: list[dict]) -> dict[int, list[tuple[int, str]]]:
    """consume-* record lines -> {partition: [(offset, value)]} in the order read."""
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    for p, o, _ts, _k, v, _h in decode_records(lines):
        out.setdefault(p, []).append((o, v.decode()))
    return out


def values(parts: dict[int, list[tuple[int, str]]]) -> dict[int, list[str]]:
    return {p: [v for _o, v in rs] for p, rs in parts.items()}


def java_consume_all(bs: str, topic: str, isolation: str) -> tuple[dict[int, list[tuple[int, str]]], dict]:
    lines = java("consume-all", bs, topic, "--isolation", isolation, "--timeout-ms", "30000")
    s = summary(lines)
    assert s["timed_out"] is False, f"{isolation} consumer never reached the log end: {s}"
    assert s["positions"] == s["log_end"], s
    # every transaction is complete: the last stable offset is the log end offset
    assert s["end_offsets"] == s["log_end"], s
    parts = by_partition(lines)
    for p, rs in parts.items():
        offsets = [o for o, _v in rs]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets out of order or repeated: {offsets}"
    return parts, s


def log_end_offsets(bs: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": f"leo-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def ck_read_to_end(bs: str, topic: str, isolation: str, timeout: float = 30.0) -> dict[int, list[tuple[int, str]]]:
    """librdkafka: read every partition from the beginning until its position reaches the log end offset
    (asserted: a read_committed position passes aborted records and the trailing markers too)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    leo = log_end_offsets(bs, topic)
    c = Consumer({"bootstrap.servers": bs, "group.id": f"read-{uuid.uuid4().hex[:8]}", "isolation.level": isolation,
                  "enable.auto.commit": False})
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while True:
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(PARTITIONS)])}
            if all(pos[p] >= leo[p] for p in range(PARTITIONS)):
                break
            assert time.monotonic() < deadline, f"librdkafka {isolation} stuck at {pos}, log end {leo}"
            for m in c.consume(num_messages=500, timeout=0.2):
                assert not m.error(), m.error()
                out[m.partition()].append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return out


def stable_offsets(bs: str, topic: str) -> dict[int, int]:
    """ListOffsets latest, read_committed (kafka-python): the last stable offset of each partition."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False)
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return {tp.partition: o for tp, o in ends.items()}
    finally:
        c.close()


def group_offsets(bs: str, group: str) -> dict[tuple[str, int], int]:
    from kafka.admin import KafkaAdminClient
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        return {(tp.topic, tp.partition): om.offset for tp, om in a.list_group_offsets(group)[group].items()}
    finally:
        a.close()


def produce_input(bs: str, topic: str, n: int) -> dict[int, list[str]]:
    """n plain (non-transactional) records "in-<i>" spread over the partitions -> {partition: values in order}."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=5)
    try:
        futs = [(f"in-{i}", p.send(topic, key=f"k-{i % 17}".encode(), value=f"in-{i}".encode(),
                                   partition=i % PARTITIONS)) for i in range(n)]
        p.flush()
        got = sorted((f.get(timeout=30).partition, f.get(timeout=30).offset, v) for v, f in futs)
    finally:
        p.close()
    out: dict[int, list[str]] = {q: [] for q in range(PARTITIONS)}
    for q, _o, v in got:
        out[q].append(v)
    return out


def txn_values(t: int, per: int) -> dict[int, list[str]]:
    """The records txn-produce sends in transaction t (both drivers, and the confluent-kafka test)."""
    return {p: [f"t{t}-p{p}-{j}" for j in range(per)] for p in range(PARTITIONS)}


def expected_txn_log(txns: int, per: int, tail_committed=(), tail_all=()) -> tuple[dict, dict]:
    """(committed, everything) per partition for txns transactions, odd ones aborted, then the extra records."""
    committed: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    everything: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for t in range(txns):
        for p, vs in txn_values(t, per).items():
            everything[p] += vs
            if t % 2 == 0:
                committed[p] += vs
    for p in range(PARTITIONS):
        everything[p] += [f(p) for f in tail_all]
        committed[p] += [f(p) for f in tail_committed]
    return committed, everything


def check_txn_lines(lines: list[dict], txns: int, per: int) -> dict[int, list[int]]:
    """The per-transaction lines of txn-produce -> {partition: offsets of committed records}; each transaction's
    records are contiguous and after the previous transaction's (its marker in between)."""
    tl = [x for x in lines if "txn" in x]
    assert [x["txn"] for x in tl] == list(range(txns))
    assert [x["result"] for x in tl] == ["commit" if t % 2 == 0 else "abort" for t in range(txns)]
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    prev_last = {p: -1 for p in range(PARTITIONS)}
    for x in tl:
        assert sorted(x["partitions"]) == [str(p) for p in range(PARTITIONS)], x
        for ps, (first, last, count) in x["partitions"].items():
            p = int(ps)
            assert count == per and last - first + 1 == per, x
            assert first > prev_last[p], f"transaction {x['txn']} overlaps the previous one on partition {p}"
            if prev_last[p] >= 0:
                assert first == prev_last[p] + 2, f"no single marker between transactions on partition {p}: {x}"
            prev_last[p] = last
            if x["result"] == "commit":
                offsets[p] += list(range(first, last + 1))
    return offsets


# -- Java ------------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("java_client")
@pytest.mark.parametrize("fence", ["mid", "idle"])
def test_java_transactions_read_committed_and_fencing(broker, fence):
    """6 transactions of 5 records to each of 3 partitions, odd ones aborted after their records are acked;
    then a second producer with the same transactional.id fences the first (mid: while the first has an open
    transaction with acked records, which the fencing aborts; idle: between transactions) and commits one more."""
    bs = broker.bootstrap_servers
    topic = f"jtxn-{fence}"
    create(bs, topic)
    txns, per = 6, 5
    lines = java("txn-produce", bs, topic, txns, per, "--transactional-id", f"jtid-{fence}", "--fence", fence)
    s = summary(lines)
    assert (s["txns"], s["committed"], s["aborted"]) == (txns, 3, 3)
    committed_offsets = check_txn_lines(lines, txns, per)
    f = next(x for x in lines if "fence" in x)
    assert f["commit_error"] == "ProducerFencedException", f
    if fence == "idle":
        assert f["send_error"] == "ProducerFencedException", f
    assert {"after_fence": "commit"} in lines

    tail_all = ([lambda p: f"fenced-p{p}"] if fence == "mid" else []) + [lambda p: f"after-fence-p{p}"]
    want_committed, want_all = expected_txn_log(txns, per, tail_committed=[lambda p: f"after-fence-p{p}"],
                                                tail_all=tail_all)
    rc, rc_sum = java_consume_all(bs, topic, "read_committed")
    assert values(rc) == want_committed
    for p in range(PARTITIONS):  # the committed records are where the producer's acks said
        assert [o for o, _v in rc[p]][:len(committed_offsets[p])] == committed_offsets[p]
    ru, ru_sum = java_consume_all(bs, topic, "read_uncommitted")
    assert values(ru) == want_all
    assert ru_sum["log_end"] == rc_sum["log_end"]
    # librdkafka reads the Java client's transactions the same way
    assert values(ck_read_to_end(bs, topic, "read_committed")) == want_committed


@pytest.mark.usefixtures("java_client")
def test_java_consume_transform_produce(broker):
    bs = broker.bootstrap_servers
    create(bs, "jctp-in", "jctp-out")
    n = 300
    inp = produce_input(bs, "jctp-in", n)
    lines = java("txn-ctp", bs, "jctp-in", "jctp-out", "jctp-group", "jctp-tid", "--max-per-txn", "40")
    s = summary(lines)
    assert s["records"] == n and s["txns"] >= n // 40, s
    assert sum(x["records"] for x in lines if "txn" in x) == n
    out, _ = java_consume_all(bs, "jctp-out", "read_committed")
    assert values(out) == {p: [f"out:{v}" for v in vs] for p, vs in inp.items()}  # exactly once, in order
    end = log_end_offsets(bs, "jctp-in")
    assert group_offsets(bs, "jctp-group") == {("jctp-in", p): end[p] for p in range(PARTITIONS)}


@pytest.mark.usefixtures("java_client")
@pytest.mark.parametrize("restart_broker", [False, True], ids=["same-broker", "broker-restarted"])
def test_java_consume_transform_produce_crash_and_restart(broker_factory, tmp_path, restart_broker):
    """The first run's JVM is killed (SIGKILL) after transaction 2's records and offsets reached the broker, before its
    commit; the restart (same transactional.id and group.instance.id) aborts it in initTransactions (the broker
    answers CONCURRENT_TRANSACTIONS until the abort is complete) and goes on from the last committed offsets.
    broker-restarted: the broker stops (cleanly) and starts again on its data directory in between, so the open
    transaction, the producer state and the pending offsets come back from the logs."""
    b = broker_factory(data_dir=tmp_path / "data")
    bs = b.bootstrap_servers
    create(bs, "jcrash-in", "jcrash-out")
    n, per_txn, crash_at = 300, 40, 2
    inp = produce_input(bs, "jcrash-in", n)
    args = ("jcrash-in", "jcrash-out", "jcrash-group", "jcrash-tid", "--max-per-txn", per_txn,
            "--group-instance-id", "jcrash-member")
    first = java_killed_when_crashing("txn-ctp", bs, *args, "--crash-after-txns", crash_at)
    assert first and first[-1].get("crashing") is True, first[-3:]
    assert [x["txn"] for x in first if "records" in x and "crashing" not in x] == list(range(crash_at))
    done_first = sum(x["records"] for x in first if "txn" in x and "crashing" not in x)
    if restart_broker:
        b.stop()
        b = broker_factory(data_dir=tmp_path / "data")
        bs = b.bootstrap_servers
    # the halted transaction is still open: the last stable offset stays at its first record
    lso, leo = stable_offsets(bs, "jcrash-out"), log_end_offsets(bs, "jcrash-out")
    assert any(lso[p] < leo[p] for p in range(PARTITIONS)), (lso, leo)
    second = java("txn-ctp", bs, *args)
    s = summary(second)
    assert s["records"] == n - done_first, (done_first, s)  # the restart starts at the committed offsets
    out, _ = java_consume_all(bs, "jcrash-out", "read_committed")
    assert values(out) == {p: [f"out:{v}" for v in vs] for p, vs in inp.items()}
    everything, _ = java_consume_all(bs, "jcrash-out", "read_uncommitted")
    aborted = sum(map(len, everything.values())) - n
    assert aborted == first[-1]["records"], "the crashed transaction's records are in the log, aborted"
    end = log_end_offsets(bs, "jcrash-in")
    assert group_offsets(bs, "jcrash-group") == {("jcrash-in", p): end[p] for p in range(PARTITIONS)}


# -- confluent-kafka (librdkafka) ------------------------------------------------------------------------
def ck_txn_producer(bs: str, tid: str):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5, "acks": "all"})
    p.init_transactions(30)
    return p


def test_confluent_transactions_read_committed_and_fencing(broker):
    from confluent_kafka import KafkaError, KafkaException
    bs = broker.bootstrap_servers
    topic = "cktxn"
    create(bs, topic)
    txns, per = 6, 5
    p = ck_txn_producer(bs, "cktid")
    errors = []
    for t in range(txns):
        p.begin_transaction()
        for part, vs in txn_values(t, per).items():
            for j, v in enumerate(vs):
                p.produce(topic, key=f"k-{part}-{j}", value=v, partition=part,
                          on_delivery=lambda err, _m: err and errors.append(err))
        assert p.flush(30) == 0  # every record acked: an aborted one is in the log
        if t % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    assert errors == []
    # an open transaction with acked records, then a second producer with the same transactional.id
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(topic, value=f"fenced-p{part}", partition=part)
    assert p.flush(30) == 0
    p2 = ck_txn_producer(bs, "cktid")  # aborts the open transaction and fences p
    with pytest.raises(KafkaException) as exc:
        p.commit_transaction(30)
    err = exc.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), err
    p2.begin_transaction()
    for part in range(PARTITIONS):
        p2.produce(topic, value=f"after-fence-p{part}", partition=part)
    p2.commit_transaction(30)
    del p, p2

    want_committed, want_all = expected_txn_log(
        txns, per, tail_committed=[lambda q: f"after-fence-p{q}"],
        tail_all=[lambda q: f"fenced-p{q}", lambda q: f"after-fence-p{q}"])
    assert values(ck_read_to_end(bs, topic, "read_committed")) == want_committed
    assert values(ck_read_to_end(bs, topic, "read_uncommitted")) == want_all


def ck_ctp(bs: str, src: str, dst: str, group: str, tid: str, *, stop_after_txns: int | None = None,
           timeout: float = 60.0, crash: bool = False) -> list[int]:
    """confluent-kafka consume-transform-produce; returns the records of each committed transaction. With
    stop_after_txns the transaction of that index is produced, its offsets sent and flushed, and then the
    producer is dropped without commit or abort (the consumer closes); with `crash` too, the process prints
    what it did (a JSON list) and kills itself with SIGKILL instead (nothing closes)."""
    from confluent_kafka import Consumer, TopicPartition
    end = log_end_offsets(bs, src)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    p = ck_txn_producer(bs, tid)
    done: list[int] = []
    try:
        c.subscribe([src])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"not done after {done}"
            msgs = c.consume(num_messages=40, timeout=0.2)
            if not msgs:
                asg = c.assignment()
                if len(asg) == PARTITIONS and all(tp.offset >= end[tp.partition] for tp in c.position(asg)):
                    return done
                continue
            p.begin_transaction()
            offsets: dict[int, int] = {}
            for m in msgs:
                assert not m.error(), m.error()
                p.produce(dst, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            p.send_offsets_to_transaction([TopicPartition(src, q, o) for q, o in offsets.items()],
                                          c.consumer_group_metadata(), 30)
            if stop_after_txns is not None and len(done) == stop_after_txns:
                assert p.flush(30) == 0
                if crash:
                    import json
                    import os
                    import signal
                    print(json.dumps(done + [-len(msgs)]), flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                return done + [-len(msgs)]
            p.commit_transaction(30)
            done.append(len(msgs))
    finally:
        c.close()
        del p


def test_confluent_consume_transform_produce_with_abandoned_transaction(broker):
    bs = broker.bootstrap_servers
    create(bs, "ckctp-in", "ckctp-out")
    n = 300
    inp = produce_input(bs, "ckctp-in", n)
    first = ck_ctp(bs, "ckctp-in", "ckctp-out", "ckctp-group", "ckctp-tid", stop_after_txns=2)
    assert len(first) == 3 and first[-1] < 0
    abandoned = -first[-1]
    # the restart's init_transactions aborts the abandoned transaction; its offsets never count
    second = ck_ctp(bs, "ckctp-in", "ckctp-out", "ckctp-group", "ckctp-tid")
    assert sum(first[:-1]) + sum(second) == n
    want = {p: [f"out:{v}" for v in vs] for p, vs in inp.items()}
    assert values(ck_read_to_end(bs, "ckctp-out", "read_committed")) == want
    assert sum(map(len, ck_read_to_end(bs, "ckctp-out", "read_uncommitted").values())) == n + abandoned
    end = log_end_offsets(bs, "ckctp-in")
    assert group_offsets(bs, "ckctp-group") == {("ckctp-in", p): end[p] for p in range(PARTITIONS)}


def test_confluent_consume_transform_produce_killed_and_restarted(broker):
    """The acceptance's crash with confluent-kafka: a process runs the loop and is killed with SIGKILL after
    transaction 2's records and offsets reached the broker, before its commit; the restart (same
    transactional.id, same group) aborts it in init_transactions and goes on from the committed offsets."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    bs = broker.bootstrap_servers
    create(bs, "ckkill-in", "ckkill-out")
    n = 300
    inp = produce_input(bs, "ckkill-in", n)
    tests_dir = str(Path(__file__).resolve().parent.parent)
    code = (f"import sys; sys.path.insert(0, {tests_dir!r}); "
            "from clients.test_transactions_clients import ck_ctp; "
            f"ck_ctp({bs!r}, 'ckkill-in', 'ckkill-out', 'ckkill-group', 'ckkill-tid', stop_after_txns=2, crash=True)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    first = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(first) == 3 and first[-1] < 0
    # the killed transaction is still open: the last stable offset stays at its first record
    lso, leo = stable_offsets(bs, "ckkill-out"), log_end_offsets(bs, "ckkill-out")
    assert any(lso[p] < leo[p] for p in range(PARTITIONS)), (lso, leo)
    second = ck_ctp(bs, "ckkill-in", "ckkill-out", "ckkill-group", "ckkill-tid")
    assert sum(first[:-1]) + sum(second) == n
    want = {p: [f"out:{v}" for v in vs] for p, vs in inp.items()}
    assert values(ck_read_to_end(bs, "ckkill-out", "read_committed")) == want
    assert sum(map(len, ck_read_to_end(bs, "ckkill-out", "read_uncommitted").values())) == n - first[-1]
    end = log_end_offsets(bs, "ckkill-in")
    assert group_offsets(bs, "ckkill-group") == {("ckkill-in", p): end[p] for p in range(PARTITIONS)}


def test_confluent_group_consumer_waits_for_pending_transactional_offsets(broker):
    """A read_committed group consumer that joins while a transaction holds a pending offset commit for its group
    (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT until the transaction ends) starts from the transaction's
    offset once it commits, never from the older committed one."""
    from confluent_kafka import Consumer, TopicPartition
    bs = broker.bootstrap_servers
    create(bs, "ckstable", partitions=1)
    from confluent_kafka import Producer
    plain_producer = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(20):
        plain_producer.produce("ckstable", value=f"in-{i}", partition=0)
    assert plain_producer.flush(30) == 0
    del plain_producer
    plain = Consumer({"bootstrap.servers": bs, "group.id": "ckstable-g", "enable.auto.commit": False})
    plain.commit(offsets=[TopicPartition("ckstable", 0, 5)], asynchronous=False)
    p = ck_txn_producer(bs, "ckstable-tid")
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("ckstable", 0, 12)], plain.consumer_group_metadata(), 30)
    plain.close()
    assert group_offsets(bs, "ckstable-g") == {("ckstable", 0): 5}  # the pending offset is not committed yet
    c = Consumer({"bootstrap.servers": bs, "group.id": "ckstable-g", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["ckstable"])
        # nothing may come while the offset commit is pending: not until the consumer owns the partition (it
        # fetches the committed offsets then), nor in a second after that
        deadline, window_end = time.monotonic() + 20, None
        while window_end is None or time.monotonic() < window_end:
            assert time.monotonic() < deadline, "the consumer never got its assignment"
            m = c.poll(0.1)
            assert m is None or m.error(), f"read offset {m.offset()} while the offset commit was pending"
            if window_end is None and c.assignment():
                window_end = time.monotonic() + 1.0
        p.commit_transaction(30)
        deadline = time.monotonic() + 20
        first = None
        while first is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                first = m.offset()
        assert first == 12
    finally:
        c.close()
        del p
    assert group_offsets(bs, "ckstable-g") == {("ckstable", 0): 12}


# -- kafkajs ---------------------------------------------------------------------------------------------
def test_kafkajs_transactions_read_committed_and_fencing(broker):
    bs = broker.bootstrap_servers
    topic = "jstxn"
    create(bs, topic)
    txns, per = 6, 5
    lines = run_node("txn-produce", bs, topic, txns, per, "--transactional-id", "jstid", "--fence", "idle")
    s = summary(lines)
    assert (s["txns"], s["committed"], s["aborted"]) == (txns, 3, 3)
    committed_offsets = check_txn_lines(lines, txns, per)
    f = next(x for x in lines if "fence" in x)
    # kafkajs speaks AddPartitionsToTxn v1: fencing is INVALID_PRODUCER_EPOCH there (PRODUCER_FENCED from v2)
    assert f["error"] == "INVALID_PRODUCER_EPOCH", f
    assert {"after_fence": "commit"} in lines
    want_committed, want_all = expected_txn_log(txns, per, tail_committed=[lambda p: f"after-fence-p{p}"],
                                                tail_all=[lambda p: f"after-fence-p{p}"])
    rc = ck_read_to_end(bs, topic, "read_committed")
    assert values(rc) == want_committed
    for p in range(PARTITIONS):
        assert [o for o, _v in rc[p]][:len(committed_offsets[p])] == committed_offsets[p]
    assert values(ck_read_to_end(bs, topic, "read_uncommitted")) == want_all


def test_kafkajs_consume_transform_produce(broker):
    bs = broker.bootstrap_servers
    create(bs, "jsctp-in", "jsctp-out")
    n = 300
    inp = produce_input(bs, "jsctp-in", n)
    lines = run_node("txn-ctp", bs, "jsctp-in", "jsctp-out", "jsctp-group", "jsctp-tid", n)
    s = summary(lines)
    assert s["records"] == n and s["timed_out"] is False, s
    want = {p: [f"out:{v}" for v in vs] for p, vs in inp.items()}
    assert values(ck_read_to_end(bs, "jsctp-out", "read_committed")) == want
    end = log_end_offsets(bs, "jsctp-in")
    assert group_offsets(bs, "jsctp-group") == {("jsctp-in", p): end[p] for p in range(PARTITIONS)}


# -- the coordinator's fencing, at the wire level ---------------------------------------------------------
def test_wire_fenced_producer_cannot_take_the_new_epoch(broker):
    """What a Java or librdkafka producer sends when it bumps its own epoch after an abortable error
    (InitProducerId with its producer id and epoch): once another producer has initialized the same
    transactional id, the answer must be PRODUCER_FENCED, or the zombie gets the new producer's epoch."""
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest
    from kafkite.testing.wire_client import WireClient
    from kafkite.wire.errors import E
    from helpers import wait_until
    w = WireClient.connect(broker.bootstrap_servers)
    try:
        wait_until(lambda: w.request(FindCoordinatorRequest(key="ztid", key_type=1), 1).error_code == 0,
                   what="a transaction coordinator")

        def init(pid=-1, epoch=-1):
            def attempt():
                r = w.request(InitProducerIdRequest(transactional_id="ztid", transaction_timeout_ms=60000,
                                                    producer_id=pid, producer_epoch=epoch), 4)
                return r if r.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS) else None
            return wait_until(attempt, what="an InitProducerId answer")
        zombie = init()
        new = init()  # a new instance with the same transactional id: the epoch is bumped, the first is fenced
        assert (new.error_code, new.producer_id, new.producer_epoch) == \
            (0, zombie.producer_id, zombie.producer_epoch + 1)
        again = init(zombie.producer_id, zombie.producer_epoch)
        assert again.error_code == E.PRODUCER_FENCED, (again.error_code, again.producer_id, again.producer_epoch)
    finally:
        w.close()
