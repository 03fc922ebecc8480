"""Consumer-group failover across ZooKeeper-mode broker processes, with confluent-kafka and the Java client.

Three `kafkite serve` processes on one ZooKeeper (kafkite.testing.ProcessCluster), `__consumer_offsets`
replicated three times (5 partitions), a topic of 6 partitions with replication factor 3. Two consumer
processes of one group (tests/clients: py_consumer.py's confluent-kafka consumer, or the Java driver's
`group` command; both commit synchronously after every batch and print what they processed and committed)
read 300 records and commit them. Then the group's coordinator broker is killed with -9: the controller
elects a new leader of the group's `__consumer_offsets` partition, which loads the group and its offsets and
becomes the coordinator. 300 more records are produced through a surviving broker.

The group's id is chosen so that its coordinator is NOT the controller (deterministic: only the coordinator
moves; the controller that elects the new leader stays). Test_zk_cluster.py covers the controller's own crash.

Checked: every produced record is processed; a record is processed twice only if its consumer could not
confirm its commit (a commit refused or lost while the coordinator moved: `ConsumerProc.unconfirmed`, plus
each consumer's uncommitted tail when the coordinator was killed, empty by construction); both consumers are
still running; the committed offsets, read back from the new coordinator, equal the end offsets; and
FindCoordinator names a different, live broker: the new leader of the group's `__consumer_offsets` partition.
With confluent-kafka, a KIP-848 consumer group on the same `__consumer_offsets` partition (two members of raw
ConsumerGroupHeartbeats) moves too: the new coordinator loads it with its group, assignment and member epochs
and assignments, and a member goes on at its epoch.
"""
from __future__ import annotations

import itertools
import time
import uuid

import pytest

from clients import drivers
from clients.group_scenario import ConsumerProc, group_members, produce_batch, python_consumer
from kafkite.coordinator.hashing import partition_for
from kafkite.testing.process_cluster import ProcessCluster

pytestmark = pytest.mark.timeout(300)

SESSION_MS = 4000                 # zookeeper.session.timeout.ms: how long a killed broker stays registered
OFFSETS_PARTITIONS = 5
TOPIC, PARTITIONS = "failover", 6
BATCH = 300
_chroots = itertools.count(1)


def _cluster(zk, client: str) -> ProcessCluster:
    return ProcessCluster(
        3, zookeeper_connect=zk.connect_string, session_timeout_ms=SESSION_MS,
        chroot=f"/kafkite-zk-group-failover-{client}-{next(_chroots)}-{uuid.uuid4().hex[:8]}",
        overrides={"offsets.topic.replication.factor": "3",
                   "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                   "default.replication.factor": "3",
                   "replica.lag.time.max.ms": "3000",
                   "replica.fetch.backoff.ms": "200",
                   # the consumers' session.timeout.ms is 3000 (py_consumer.py, KafkiteDriver group)
                   "group.min.session.timeout.ms": "1000"})


def _wait(c: ProcessCluster, predicate, timeout: float, what: str):
    return c.wait_until(predicate, timeout, what, interval=0.1)


def _state(c: ProcessCluster, topic: str, p: int) -> dict:
    try:
        return c.zk_get(f"/brokers/topics/{topic}/partitions/{p}/state") or {}
    except KeyError:
        return {}


def _led_with_full_isr(c: ProcessCluster, topic: str, partitions: int) -> bool:
    states = [_state(c, topic, p) for p in range(partitions)]
    return all(s.get("leader", -1) in c.live_brokers and sorted(s.get("isr", [])) == c.live_brokers for s in states)


def _find_coordinator(c: ProcessCluster, via: int, group: str) -> int | None:
    """The coordinator's node id as broker `via` answers FindCoordinator, None on an error."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    from kafkite.testing.wire_client import WireClient
    with WireClient.connect(c.bootstrap_of(via)) as w:
        r = w.request(FindCoordinatorRequest(key=group, key_type=0), 1)
    return r.node_id if r.error_code == 0 else None


def _committed(c: ProcessCluster, coordinator: int, group: str) -> dict[int, int] | None:
    """The group's committed offsets of TOPIC (partition -> offset, partitions without a commit left out), from
    an OffsetFetch sent to `coordinator`; None when it answers with an error (not/no longer the coordinator,
    loading)."""
    from kafka.protocol.consumer import OffsetFetchRequest

    from kafkite.testing.wire_client import WireClient
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    req = OffsetFetchRequest(group_id=group, topics=[T(name=TOPIC, partition_indexes=list(range(PARTITIONS)))])
    with WireClient.connect(c.bootstrap_of(coordinator)) as w:
        r = w.request(req, 5)
    if r.error_code != 0 or any(p.error_code != 0 for t in r.topics for p in t.partitions):
        return None
    return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions if p.committed_offset >= 0}


def _ends(produced: list[tuple[int, int]]) -> dict[int, int]:
    """partition -> its end offset, from the acknowledged (partition, offset) pairs (nothing else writes TOPIC)."""
    ends: dict[int, int] = {}
    for p, o in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


def _log_ends(c: ProcessCluster, via: int) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition
    cons = KafkaConsumer(bootstrap_servers=c.bootstrap_of(via), enable_auto_commit=False, request_timeout_ms=20000)
    try:
        ends = cons.end_offsets([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    finally:
        cons.close()
    return {tp.partition: o for tp, o in ends.items() if o > 0}


def _consumer(client: str, bootstrap: str, group: str) -> ConsumerProc:
    if client == "java":
        return ConsumerProc(drivers.java_argv("group", bootstrap, TOPIC, group, "range"))
    return python_consumer("confluent", bootstrap, TOPIC, group, "range")


def _consumer_group_before(c: ProcessCluster, coordinator: int, offsets_partition: int):
    """A KIP-848 consumer group on the same __consumer_offsets partition: two members (raw ConsumerGroupHeartbeats)
    reconciled to a Stable group -> (its id, its ConsumerGroupDescribe, the members' last answers)."""
    from test_consumer_group_protocol import describe, hb, parts
    from kafkite.testing.wire_client import WireClient
    group = next(g for g in (f"zk-kip848-{i}" for i in range(1000))
                 if partition_for(g, OFFSETS_PARTITIONS) == offsets_partition)
    with WireClient.connect(c.bootstrap_of(coordinator)) as w:
        a = hb(w, group, topics=[TOPIC])
        b = hb(w, group, topics=[TOPIC])
        tid = a.assignment.topic_partitions[0].topic_id
        a = hb(w, group, a.member_id, 1, topics=None, owned=[(tid, range(PARTITIONS))])
        a = hb(w, group, a.member_id, 1, topics=None, owned=[(tid, sorted(parts(a)))])
        b = hb(w, group, b.member_id, 2, topics=None, owned=[])
        before = describe(w, group)
    assert before.group_state == "Stable" and (a.member_epoch, b.member_epoch) == (2, 2), before
    return group, before, tid, b


def _consumer_group_after(c: ProcessCluster, new_coordinator: int, group, before, tid, b) -> None:
    """The new coordinator loaded the consumer group from the replicated records: the same epochs, members and
    assignments; a member goes on at its epoch."""
    from test_consumer_group_protocol import describe, hb, parts
    from kafkite.testing.wire_client import WireClient

    def view(d):
        return (d.group_state, d.group_epoch, d.assignment_epoch,
                {m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
                 for m in d.members})
    with WireClient.connect(c.bootstrap_of(new_coordinator)) as w:
        after = _wait(c, lambda: (d := describe(w, group)).error_code == 0 and d, 20,
                      f"ConsumerGroupDescribe of {group} at the new coordinator")
        assert view(after) == view(before)
        r = hb(w, group, b.member_id, 2, topics=None, owned=[(tid, sorted(parts(b)))])
        assert (r.error_code, r.member_epoch) == (0, 2)


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_group_moves_to_the_new_coordinator_when_its_broker_is_killed(kafkite_zookeeper, client):
    if client == "java":
        drivers.need("java")
    from kafka.admin import KafkaAdminClient, NewTopic
    consumers: list[ConsumerProc] = []
    notes: list[str] = []             # what the test saw, for the failure message
    with _cluster(kafkite_zookeeper, client) as c:
        try:
            _wait(c, lambda: c.live_brokers == [1, 2, 3] and c.controller_id in (1, 2, 3), 30,
                  "three brokers registered, a controller")
            # __consumer_offsets exists once some FindCoordinator asked for it: every partition led, full ISR
            _wait(c, lambda: _find_coordinator(c, 1, "zk-group-failover-probe") is not None, 30,
                  "__consumer_offsets created (FindCoordinator answers)")
            _wait(c, lambda: _led_with_full_isr(c, "__consumer_offsets", OFFSETS_PARTITIONS), 30,
                  "every __consumer_offsets partition led, with all three brokers in its ISR")
            admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=20000)
            try:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
            finally:
                admin.close()
            _wait(c, lambda: _led_with_full_isr(c, TOPIC, PARTITIONS), 30,
                  f"every partition of {TOPIC} led, with all three brokers in its ISR")

            # a group whose coordinator (its __consumer_offsets partition's leader) is not the controller
            controller = c.controller_id
            group = next(g for g in (f"zk-failover-{client}-{i}" for i in range(100))
                         if _state(c, "__consumer_offsets",
                                   partition_for(g, OFFSETS_PARTITIONS))["leader"] != controller)
            offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
            coordinator = _state(c, "__consumer_offsets", offsets_partition)["leader"]
            _wait(c, lambda: all(_find_coordinator(c, b, group) == coordinator for b in (1, 2, 3)), 20,
                  f"every broker names broker {coordinator} the coordinator of {group}")
            stable = c.bootstrap_of(controller)     # a broker that stays up throughout
            notes.append(f"group {group}: __consumer_offsets-{offsets_partition} led by broker {coordinator}; "
                         f"controller {controller}")

            consumers = [_consumer(client, c.bootstrap_servers, group) for _ in range(2)]

            def members_ok() -> bool:
                m = group_members(stable, group)
                return len(m) == 2 and sorted(len(p) for p in m.values()) == [3, 3] \
                    and set().union(*m.values()) == set(range(PARTITIONS))
            _wait(c, members_ok, 60, "both consumers in the group, 3 partitions each")

            produced = produce_batch(stable, TOPIC, 0, BATCH)

            def processed_all() -> bool:
                return set(produced) <= {r for k in consumers for r in k.processed}

            def committed_all(coord: int) -> bool:
                return all(k.committed_upto == len(k.processed) for k in consumers) \
                    and _committed(c, coord, group) == _ends(produced)
            _wait(c, processed_all, 60, f"the first {BATCH} records processed")
            _wait(c, lambda: committed_all(coordinator), 30, f"the first {BATCH} records committed")
            kip848 = _consumer_group_before(c, coordinator, offsets_partition) if client == "confluent" else None
            # what a consumer had processed without a confirmed commit when the coordinator died (empty here:
            # everything was committed, and nothing is produced meanwhile)
            tail_at_kill = {r for k in consumers for r in k.uncommitted()}

            t0 = time.monotonic()
            c.kill_broker(coordinator)
            _wait(c, lambda: coordinator not in c.live_brokers, SESSION_MS / 1000 + 10,
                  f"the killed coordinator {coordinator} deregistered")
            survivors = c.live_brokers

            def moved():
                new = _find_coordinator(c, controller, group)
                leader = _state(c, "__consumer_offsets", offsets_partition).get("leader", -1)
                return new if new not in (None, coordinator) and new == leader and new in survivors else None
            new_coordinator = _wait(c, moved, 20, f"FindCoordinator naming the new leader of "
                                                  f"__consumer_offsets-{offsets_partition}")
            notes.append(f"killed broker {coordinator}; new coordinator {new_coordinator} named after "
                         f"{time.monotonic() - t0:.1f}s")
            if kip848 is not None:
                _consumer_group_after(c, new_coordinator, *kip848)
                notes.append("the KIP-848 group reloaded by the new coordinator with its epochs and assignment")
            # the topic's partitions the killed broker led have new leaders too
            _wait(c, lambda: all(_state(c, TOPIC, p).get("leader", -1) in survivors for p in range(PARTITIONS)), 20,
                  f"every partition of {TOPIC} led by a surviving broker")

            produced += produce_batch(stable, TOPIC, BATCH, BATCH)
            _wait(c, processed_all, 60, f"the {BATCH} records produced after the kill processed")
            notes.append(f"everything processed {time.monotonic() - t0:.1f}s after the kill")

            # the group keeps its committed offsets across the move, and commits what it processed since
            ends = _ends(produced)
            assert _log_ends(c, controller) == ends, "the topic's end offsets differ from the acknowledged records"
            _wait(c, lambda: _committed(c, new_coordinator, group) == ends, 30,
                  "the committed offsets, read from the new coordinator, at the end offsets")
            _wait(c, lambda: all(_find_coordinator(c, b, group) == new_coordinator for b in survivors), 30,
                  f"both surviving brokers naming broker {new_coordinator} the coordinator")

            def members_after() -> bool:
                m = group_members(stable, group)
                return len(m) == 2 and set().union(*m.values()) == set(range(PARTITIONS))
            _wait(c, members_after, 30,
                  "both consumers members of the group at the new coordinator, every partition assigned")

            # checked last, so that a late re-read (e.g. after a rejoin) counts too
            dead = [i for i, k in enumerate(consumers) if k.proc.poll() is not None]
            assert not dead, f"consumer(s) {dead} exited during the failover"
            all_processed = [r for k in consumers for r in k.processed]
            seen = set(all_processed)
            assert set(produced) <= seen, "a record was skipped"
            dupes = {r for r in seen if all_processed.count(r) > 1}
            allowed = tail_at_kill.union(*(k.unconfirmed for k in consumers))
            assert dupes <= allowed, \
                f"processed twice though their commit was confirmed: {sorted(dupes - allowed)[:10]} " \
                f"({len(dupes - allowed)} records; {len(dupes)} duplicates in all)"
            notes.append(f"{len(dupes)} records processed twice, {sum(len(k.unconfirmed) for k in consumers)} "
                         f"unconfirmed commits")
            print("\n".join(notes))       # shown with -s / -rP
        except Exception as exc:
            diag = "\n".join(f"consumer {i}: unconfirmed={len(k.unconfirmed)} committed_upto={k.committed_upto} "
                             f"{k.diagnosis()}" for i, k in enumerate(consumers))
            raise AssertionError(f"{exc}\n" + "\n".join(notes) + f"\n{diag}\n{c.log_tails(40)}") from exc
        finally:
            for k in consumers:
                k.stop()
