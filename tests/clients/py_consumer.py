"""A group consumer in its own process, for group scenarios (crash = SIGKILL, leave = SIGTERM).

    python py_consumer.py CLIENT BOOTSTRAP TOPIC GROUP [STRATEGY]

CLIENT: kafka-python | aiokafka | confluent (STRATEGY consumer-protocol: group.protocol=consumer). Prints JSON lines on stdout:
{"rec": [partition, offset]} for each processed record, then {"commit": n} after
each synchronous commit of everything processed so far ({"commit_failed": n} when that commit
was refused: those records may be processed again by the partition's next owner); {"closed": true} on a
clean close (LeaveGroup sent).
"""
from __future__ import annotations

import json
import signal
import sys
import time

stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def out(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_kafka_python(bs, topic, group, strategy):
    from kafka import KafkaConsumer
    from kafka.errors import CommitFailedError, RebalanceInProgressError
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=3000, heartbeat_interval_ms=300,
                      max_poll_interval_ms=30000, partition_assignment_strategy=[assignors[strategy or "range"]])
    # subscribed once the topic's partitions are known (tests/helpers.py kp_group_consumer says why: kafka-python
    # 3.0.12 may drop a leader's SyncGroup answer after an assignment made without them)
    while not stop and not c.partitions_for_topic(topic):
        time.sleep(0.05)
    c.subscribe([topic])
    n = 0
    coordinator, stuck_since = c._coordinator, None
    while not stop:
        batch = c.poll(timeout_ms=200)
        # kafka-python 3.0.12: a poll() whose time ran out while its JoinGroup/SyncGroup was in flight leaves the task
        # for the next poll, which skips it once the client's need_rejoin() turns False meanwhile (join_group_async
        # loops `while self.need_rejoin()`): the member stays REBALANCING, heartbeats off, partitions revoked, until
        # the broker expires it, and never joins again (seen: the broker had answered its SyncGroup in 11 ms). The
        # driver asks that client for a rejoin then, as its own rejoin path would, and says so ("rejoin_kick"): the
        # scenario counts the rebalance that follows as one the test caused.
        task = coordinator._join_task
        if coordinator.rebalance_in_progress() and task is not None and task.is_done and not coordinator.need_rejoin():
            stuck_since = stuck_since or time.monotonic()
            if time.monotonic() - stuck_since > 1.0:
                coordinator.request_rejoin()
                out({"rejoin_kick": True})
                stuck_since = None
        else:
            stuck_since = None
        for tp, msgs in batch.items():
            for m in msgs:
                out({"rec": [m.partition, m.offset]})
                n += 1
        if batch:
            # a commit while the group rebalances is refused (as Kafka refuses it): those records
            # may be processed again by the partition's next owner
            try:
                c.commit()
                out({"commit": n})
            except (CommitFailedError, RebalanceInProgressError) as e:
                out({"commit_failed": n, "error": repr(e)})
    c.close()
    out({"closed": True})


def run_aiokafka(bs, topic, group, strategy):
    import asyncio

    async def main():
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=3000, heartbeat_interval_ms=300)
        await c.start()
        n = 0
        try:
            while not stop:
                batch = await c.getmany(timeout_ms=200)
                for tp, msgs in batch.items():
                    for m in msgs:
                        out({"rec": [m.partition, m.offset]})
                        n += 1
                if batch:
                    try:
                        await c.commit()
                        out({"commit": n})
                    except (CommitFailedError, IllegalStateError, RebalanceInProgressError) as e:
                        out({"commit_failed": n, "error": repr(e)})
        finally:
            await c.stop()
        out({"closed": True})
    asyncio.run(main())


def run_confluent(bs, topic, group, strategy):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    if strategy == "consumer-protocol":  # KIP-848: the broker assigns; the session is the broker's setting
        conf = {"group.protocol": "consumer"}
    else:
        conf = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": strategy or "range"}
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **conf})
    c.subscribe([topic])
    n = 0
    while not stop:
        msgs = c.consume(500, timeout=0.2)
        good = [m for m in msgs if not m.error()]
        for m in good:
            out({"rec": [m.partition(), m.offset()]})
            n += 1
        if good:
            # explicit offsets: a partition revoked while this batch was handed out (cooperative
            # rebalancing runs its callback inside consume()) is committed too, or reported
            last = {}
            for m in good:
                last[m.partition()] = m.offset() + 1
            try:
                c.commit(offsets=[TopicPartition(topic, p, o) for p, o in last.items()], asynchronous=False)
                out({"commit": n})
            except KafkaException as e:
                out({"commit_failed": n, "error": str(e)})
    c.close()
    out({"closed": True})


if __name__ == "__main__":
    client, bs, topic, group = sys.argv[1:5]
    strategy = sys.argv[5] if len(sys.argv) > 5 else None
    {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent": run_confluent}[client](
        bs, topic, group, strategy)
