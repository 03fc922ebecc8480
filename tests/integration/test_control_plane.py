"""The control plane (issue "Fault injection and inspection from any language", first slice): `kafkite serve
--control-port` serves the broker's faults and request log over HTTP/JSON, and `kafkite control` drives it from a
shell. A confluent-kafka producer sees NOT_LEADER_OR_FOLLOWER three times, retries and succeeds, and the request log
shows the four Produce requests (the three answered with the injected error) and the Metadata refreshes."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kafkite.testing.process import BrokerProcess


def control(url: str, *args: str, token: str | None = None) -> tuple[int, object]:
    argv = [sys.executable, "-m", "kafkite.cli", "control", "--url", url, *(["--token", token] if token else []),
            *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    out = p.stdout if p.returncode == 0 else p.stderr
    return p.returncode, json.loads(out.strip().splitlines()[-1])


def http(url: str, method: str, path: str, body=None, token: str | None = None) -> tuple[int, object]:
    req = urllib.request.Request(url + path, method=method, data=None if body is None else (
        body if isinstance(body, bytes) else json.dumps(body).encode()))
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def served():
    with BrokerProcess(control=True) as b:
        yield b


def test_a_produce_error_injected_from_the_shell(served):
    from confluent_kafka import Producer
    url, bs = served.control_url, served.bootstrap_servers
    assert url.startswith("http://127.0.0.1:")
    p = Producer({"bootstrap.servers": bs, "retry.backoff.ms": 50, "linger.ms": 0})
    p.produce("ctl", value=b"warm-up")
    assert p.flush(30) == 0
    assert control(url, "requests", "--clear")[0] == 0
    code, state = control(url, "error", "Produce", "NOT_LEADER_OR_FOLLOWER", "--count", "3")
    assert code == 0 and state["errors"] == [{"id": state["id"], "api": "Produce",
                                              "errors": ["NOT_LEADER_OR_FOLLOWER"] * 3, "rtts": None, "remaining": 3, "broker": None, "version": None, "client_id": None,
                                              "topic": None, "partition": None, "fired": 0}]
    delivered = []
    p.produce("ctl", value=b"through-the-faults", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None]
    code, log = control(url, "requests", "--api", "Produce")
    produces = log["requests"]
    assert [r["error"] for r in produces] == ["NOT_LEADER_OR_FOLLOWER"] * 3 + [None], produces
    assert all(r["injected"] for r in produces[:3]) and produces[-1]["client_id"] == "rdkafka"
    _, everything = control(url, "requests")
    assert any(r["api"] == "Metadata" for r in everything["requests"]), "no Metadata refresh after the errors"
    assert control(url, "faults")[1]["errors"] == []  # used up


def test_latency_drops_and_clear(served):
    from kafka import KafkaProducer
    url, bs = served.control_url, served.bootstrap_servers
    assert control(url, "latency", "1", "300")[0] == 0
    kp = KafkaProducer(bootstrap_servers=bs)
    t0 = time.monotonic()
    kp.send("ctl-lat", b"slow").get(timeout=30)
    assert time.monotonic() - t0 >= 0.3
    assert control(url, "clear")[1] == {"errors": [], "drops": [], "latency": [], "holds": [], "versions": [],
                                                    "followers": [], "metadata_leaders": []}
    assert control(url, "drop", "Produce", "--count", "1")[0] == 0
    kp.send("ctl-lat", b"dropped-then-retried").get(timeout=30)  # the producer retries on the cut connection
    kp.close()
    assert control(url, "faults")[1]["drops"] == []


def test_bad_input_is_a_4xx_with_a_message(served):
    url = served.control_url
    assert http(url, "POST", "/v1/errors", {"api": "Produce", "error": "NO_SUCH_ERROR"}) == (
        400, {"error": "unknown error 'NO_SUCH_ERROR': a Kafka error name (NOT_LEADER_OR_FOLLOWER, ...) or code"})
    assert http(url, "POST", "/v1/errors", {"api": "Nope", "error": 6})[0] == 400
    assert http(url, "POST", "/v1/errors", {"api": "Produce", "error": 6, "count": 0})[0] == 400
    assert http(url, "POST", "/v1/latency", {"broker": 7, "ms": 1})[1]["error"].startswith("unknown broker 7")
    assert http(url, "POST", "/v1/errors", b"{not json")[0] == 400
    assert http(url, "GET", "/v1/nothing")[0] == 404
    assert http(url, "PUT", "/v1/errors", {})[0] == 405
    code, listing = http(url, "GET", "/v1")
    assert code == 200 and "/v1/errors" in listing["routes"] and listing["brokers"] == [1]
    assert control(url, "error", "Produce", "BOGUS")[0] == 1  # the CLI exits 1 on a 4xx


def test_a_token_guards_the_control_listener():
    with BrokerProcess(control=True, control_token="s3cret") as b:
        assert http(b.control_url, "GET", "/v1/faults")[0] == 401
        assert http(b.control_url, "GET", "/v1/faults", token="wrong")[0] == 401
        assert http(b.control_url, "GET", "/v1/faults", token="s3cret")[0] == 200
        assert control(b.control_url, "faults", token="s3cret")[0] == 0


def test_the_same_controls_on_a_zookeeper_process_cluster(kafkite_zookeeper):
    """Each broker process of a 3-broker ZooKeeper cluster serves its control listener: the partition leader's
    process answers three Produce requests NOT_LEADER_OR_FOLLOWER, the producer retries and succeeds, and that
    broker's request log shows the four Produce requests; compaction now on each broker; reset to empty."""
    import uuid
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafkite.testing.process_cluster import ProcessCluster
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, control=True,
                        chroot=f"/kafkite-control-{uuid.uuid4().hex[:8]}") as c:
        def create_topic(topic: NewTopic) -> None:
            """librdkafka sends CreateTopics to the controller its last Metadata named and does not retry
            NOT_CONTROLLER (Java's Admin does); after this test stops a broker, that can be the stopped controller,
            back as a plain broker. As on Kafka, such a client asks again with fresh metadata: a new AdminClient."""
            deadline = time.monotonic() + 30
            while True:
                fresh = AdminClient({"bootstrap.servers": c.bootstrap_servers})  # (held: its result needs it)
                err = fresh.create_topics([topic])[topic.topic].exception(30)
                if err is None:
                    return
                if err.args[0].code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                    raise err

        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        create_topic(NewTopic("zk-ctl", num_partitions=1, replication_factor=3))
        leader = c.wait_until(lambda: c.leader("zk-ctl", 0) > 0 and c.leader("zk-ctl", 0), 30, "a leader")
        url = c.control_url(leader)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "retry.backoff.ms": 50, "acks": "all"})
        p.produce("zk-ctl", value=b"warm-up")
        assert p.flush(30) == 0
        assert control(url, "requests", "--clear")[0] == 0
        assert control(url, "error", "Produce", "NOT_LEADER_OR_FOLLOWER", "--count", "3")[0] == 0
        p.produce("zk-ctl", value=b"through-the-faults")
        assert p.flush(60) == 0
        produces = control(url, "requests", "--api", "Produce")[1]["requests"]
        assert [r["error"] for r in produces] == ["NOT_LEADER_OR_FOLLOWER"] * 3 + [None], produces
        assert all(r["broker"] == leader for r in produces)
        [part] = control(url, "partitions", "--topic", "zk-ctl")[1]["partitions"]  # this process's view
        assert part["leader"] == leader and sorted(part["replicas"]) == [1, 2, 3]
        assert part["local_replicas"][str(leader)]["log_end_offset"] == 2
        # the leader stopped over its own control listener, as if its process died (the process and its listener
        # stay): out of ZooKeeper at once, the leadership moves, acks=all traffic goes on; another process's broker
        # id, and a second stop, are refused and change nothing
        other = next(i for i in (1, 2, 3) if i != leader)
        code, out = control(url, "stop", str(other))
        assert code == 1 and f"unknown broker {other}" in out["error"] and c.live_brokers == [1, 2, 3]
        code, out = control(url, "stop", str(leader))
        assert code == 0 and out["brokers"] == [{"id": leader, "live": False, "port": c.ports[leader], "rack": None}]
        assert leader not in c.live_brokers and c.is_running(leader)
        assert control(url, "stop", str(leader))[0] == 1
        c.wait_until(lambda: c.leader("zk-ctl", 0) not in (-1, leader), 30, "the leadership moved")
        for i in range(20):
            p.produce("zk-ctl", value=b"while %d is down %d" % (leader, i))
        assert p.flush(60) == 0
        # started again on its port and data dir: registered, listed in Metadata, caught up into the ISR
        code, out = control(url, "start", str(leader))
        assert code == 0 and out["brokers"][0]["live"] and leader in c.live_brokers, out
        assert leader in [b[0] for b in c.metadata_view(other)["brokers"]]
        c.wait_until(lambda: leader in c.metadata_view(other)["topics"]["zk-ctl"][0][2], 30, "back in the ISR")
        c.wait_until(lambda: http(url, "GET", "/v1/partitions?topic=zk-ctl")[1]["partitions"][0]["local_replicas"][
            str(leader)]["log_end_offset"] == 22, 30, "every record on the restarted replica")
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})  # the controller may have moved: see above
        # compaction now, on every broker's replicas (each process compacts its own): a consumer reads the result
        create_topic(NewTopic("zk-compact", num_partitions=1, replication_factor=3, config={"cleanup.policy": "compact"}))
        for i in range(9):
            p.produce("zk-compact", key=b"k%d" % (i % 3), value=b"v%d" % i)
        assert p.flush(30) == 0
        c.wait_until(lambda: all(http(c.control_url(b), "GET", "/v1/partitions?topic=zk-compact")[1]["partitions"][0]
                                 ["local_replicas"][str(b)]["high_watermark"] == 9 for b in (1, 2, 3)), 30,
                     "every replica caught up")  # (over HTTP: a CLI process per poll is slow)
        for b in (1, 2, 3):
            [row] = control(c.control_url(b), "compact", "--topic", "zk-compact")[1]["compacted"]
            assert row["broker"] == b and row["records_removed"] == 6, row
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "unused"})
        consumer.assign([TopicPartition("zk-compact", 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [(m.offset(), m.value()) for m in consumer.consume(10, timeout=0.3) if not m.error()]
        consumer.close()
        assert got == [(6, b"v6"), (7, b"v7"), (8, b"v8")]
        # the controller's connection to broker b cut: a leader move does not reach b (it keeps the old leader and
        # epoch: in ZooKeeper mode a broker learns leaders from the controller only); healed, the queued LeaderAndIsr
        # and UpdateMetadata go out and b catches up
        ctrl, old = c.controller_id, c.leader("zk-ctl", 0)
        b = next(i for i in (1, 2, 3) if i not in (ctrl, old)) if ctrl != old else next(i for i in (1, 2, 3) if i != old)
        new = next(i for i in (1, 2, 3) if i not in (old, b))
        code, out = control(c.control_url(b), "cut-controller", str(b))  # not the controller's listener
        assert code == 1 and "is not the controller" in out["error"]
        before = c.metadata_view(b)["topics"]["zk-ctl"][0]
        assert control(c.control_url(ctrl), "cut-controller", str(b)) == (0, {"controller": ctrl, "cut": [b]})
        c.move_leader("zk-ctl", 0, new)
        c.wait_until(lambda: c.metadata_view(new)["topics"]["zk-ctl"][0][0] == new, 30, "the move on the new leader")
        assert c.metadata_view(b)["topics"]["zk-ctl"][0][:2] == before[:2] == (old, before[1])  # b missed it
        assert c.heal_controller(b)["cut"] == []
        c.wait_until(lambda: c.metadata_view(b)["topics"]["zk-ctl"][0][:2] == (new, before[1] + 1), 30,
                     "the healed broker's view")
        # leaders shuffled through the controller's listener: the partition gets another ISR member as leader
        [m] = c.control_call(ctrl, "POST", "/v1/leaders/shuffle", {"topics": ["zk-ctl"], "seed": 1})["moved"]
        assert m["old"] == new and m["leader"] != new
        c.wait_until(lambda: c.leader("zk-ctl", 0) == m["leader"], 30, "the shuffled leader")
        # a broker process added: the controller lists it, a topic is placed on it and served
        assert c.add_broker() == 4
        c.wait_until(lambda: 4 in [b[0] for b in c.metadata_view(c.controller_id)["brokers"]], 30, "broker 4 listed")
        create_topic(NewTopic("zk-on-4", 1, replica_assignment=[[4]]))
        c.wait_until(lambda: c.leader("zk-on-4", 0) == 4, 30, "broker 4 leading")
        p.produce("zk-on-4", value=b"on 4")
        assert p.flush(30) == 0
        # a partition reassigned onto it through the controller's listener: broker 4 copies the log, joins the ISR,
        # then the leader, not kept, hands over to it
        lead = c.leader("zk-ctl", 0)
        kept = [i for i in (1, 2, 3) if i != lead]
        part = c.reassign("zk-ctl", 0, [4] + kept)
        assert (part["replicas"], part["leader"], sorted(part["isr"])) == ([4] + kept, 4, sorted([4] + kept))
        c.wait_until(lambda: all(c.metadata_view(i)["topics"]["zk-ctl"][0][0] == 4 for i in (1, 2, 3, 4)), 30,
                     "every broker seeing the reassignment")
        c.wait_until(lambda: str(lead) not in http(c.control_url(lead), "GET", "/v1/partitions?topic=zk-ctl")[1][
            "partitions"][0]["local_replicas"], 30, "the removed replica deleted (StopReplica)")
        p.produce("zk-ctl", value=b"after the reassignment")
        assert p.flush(30) == 0
        # broker 4 decommissioned: its partitions reassigned to the others (copied first), then its process stopped
        moved = {(m["topic"], m["partition"]): m for m in c.remove_broker(4)}
        assert {("zk-on-4", 0), ("zk-ctl", 0)} <= set(moved) and all(4 not in m["replicas"] for m in moved.values())
        assert moved[("zk-on-4", 0)]["leader"] in (1, 2, 3) and c.node_ids == [1, 2, 3]
        c.wait_until(lambda: [b[0] for b in c.metadata_view(c.controller_id)["brokers"]] == [1, 2, 3], 30,
                     "broker 4 out of Metadata")
        p.produce("zk-on-4", value=b"after the decommission")
        assert p.flush(30) == 0
        on = moved[("zk-on-4", 0)]["leader"]
        [row] = http(c.control_url(on), "GET", "/v1/partitions?topic=zk-on-4")[1]["partitions"]
        assert row["local_replicas"][str(on)]["log_end_offset"] == 2  # the record made on broker 4 was copied
        # reset to empty: the topics deleted through the controller, the SCRAM users in ZooKeeper, the controls; a
        # group with committed offsets goes with ProcessCluster.empty() (each broker deletes the groups it coordinates)
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
        for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                "zk-g", [TopicPartition("zk-ctl", 0, 1)])]).values():
            f.result(30)
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(30)
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
        group_res = ConfigResource(ResourceType.GROUP, "zk-g", incremental_configs=[  # /config/groups/zk-g
            ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([group_res])[group_res].result(30)
        assert http(url, "POST", "/v1/errors", {"api": "DescribeAcls", "error": 6, "count": -1})[0] == 200
        code, out = control(url, "reset", "--data")
        assert code == 0, out
        print(f"reset to empty in ZooKeeper mode: {out['took_ms']} ms")
        emptied = out["emptied"]
        assert emptied["topics_deleted"] == ["zk-compact", "zk-ctl", "zk-on-4"] and emptied["users_deleted"] == ["alice"]
        assert emptied["group_configs_deleted"] == ["zk-g"]
        assert out["errors"] == [] and control(url, "requests")[1]["requests"] == []
        groups = {g for e in c.empty().values() for g in e["groups_deleted"]} | set(emptied["groups_deleted"])
        assert "zk-g" in groups  # (and the compaction check's consumer's, which committed)
        assert [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")] == []
        assert admin.list_consumer_groups().result(10).valid == []
        assert admin.describe_user_scram_credentials().result(10) == {}
        assert c.zk_get("/config/groups/zk-g") == {"version": 1, "config": {}}
        # the name is free at once (its deletion finished, not only begun)
        create_topic(NewTopic("zk-ctl", num_partitions=1, replication_factor=3))


def _state(url: str):
    code, state = http(url, "GET", "/v1/faults")
    assert code == 200
    return state


@pytest.mark.parametrize("method,path,body,status,message", [
    ("POST", "/v1/errors", {"api": "Nope", "error": 6}, 400, "unknown api 'Nope'"),
    ("POST", "/v1/holds", {"api": 999}, 400, "unknown api 999"),
    ("POST", "/v1/versions", {"api": "NoSuchApi", "max_version": 1}, 400, "unknown api"),
    ("POST", "/v1/errors", {"api": "Produce", "error": 6, "broker": 9}, 400, "unknown broker 9"),
    ("POST", "/v1/latency", {"broker": 7, "ms": 1}, 400, "unknown broker 7"),
    ("POST", "/v1/drops", {"api": "Produce", "broker": 2}, 400, "unknown broker 2"),
    ("POST", "/v1/errors", b"{not json", 400, "the body is not usable JSON"),
    ("POST", "/v1/errors", b"[" * 100_000, 400, "the body is not usable JSON"),  # nested past the recursion limit
    ("POST", "/v1/errors", [1, 2], 400, "the body must be object"),
    ("POST", "/v1/errors", {"api": "Produce", "error": 6, "bogus": 1}, 400, "not 'bogus'"),
    ("POST", "/v1/errors", {"api": "Produce", "error": 6, "count": True}, 400, "count must be integer"),
    ("POST", "/v1/errors", {"api": "Produce", "error": 6, "count": -2}, 400, "count must be >= -1"),
    ("POST", "/v1/errors", {"api": "Produce", "errors": []}, 400, "must have 1..1000 items"),
    ("POST", "/v1/errors", {"api": "Produce", "error": 6, "errors": [6]}, 400, "give error (one) or errors"),
    ("POST", "/v1/errors", {"api": "JoinGroup", "error": 6, "topic": "t"}, 400, "per-partition errors are for"),
    ("POST", "/v1/versions", {"api": "Fetch", "max_version": 3}, 400, "leave none"),
    ("POST", "/v1/versions", {"api": "LeaderAndIsr", "max_version": 7}, 400, "not served to clients"),
    ("POST", "/v1/versions", {"api": "Fetch"}, 400, "give max_version"),
    ("POST", "/v1/latency", {"ms": 10**9}, 400, "ms must be <= 600000"),
    ("GET", "/v1/requests?api=Nope", None, 400, "unknown api"),
    ("GET", "/v1/requests?since=x", None, 400, "since must be an integer"),
    ("GET", "/v1/nothing", None, 404, "no route /v1/nothing"),
    ("PUT", "/v1/errors", {}, 405, "/v1/errors takes GET, POST, DELETE, not PUT"),
])
def test_bad_input_answers_4xx_and_changes_nothing(served, method, path, body, status, message):
    url = served.control_url
    assert http(url, "POST", "/v1/reset", {})[0] == 200
    assert http(url, "POST", "/v1/errors", {"api": "Produce", "errors": [6, 7], "count": 2})[0] == 200
    assert http(url, "POST", "/v1/holds", {"api": "SyncGroup"})[0] == 200
    before = _state(url)
    code, out = http(url, method, path, body)
    assert code == status and message in out["error"], out
    assert _state(url) == before
    http(url, "POST", "/v1/reset", {})


def test_a_10_mb_body_is_refused_unread(served):
    """413 as soon as the Content-Length is over the limit (nothing of the body read); a client that sends the
    10 MB anyway gets the 413 or a closed connection; nothing changed either way."""
    import socket
    from urllib.parse import urlsplit
    url = served.control_url
    http(url, "POST", "/v1/reset", {})
    before = _state(url)
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(b"POST /v1/errors HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: 10485760\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ") and b"a body of at most 1048576 bytes" in answer
    big = json.dumps({"api": "Produce", "error": 6, "client_id": "x" * (10 << 20)}).encode()
    try:
        assert http(url, "POST", "/v1/errors", big)[0] == 413
    except OSError:  # the connection closed while the client was still sending
        pass
    assert _state(url) == before


def test_the_openapi_document_lists_every_route_and_the_cli_uses_only_those(served):
    import argparse
    from urllib.parse import urlsplit
    from kafkite.control import cli
    from kafkite.control.routes import ROUTES, validate
    url = served.control_url
    code, doc = http(url, "GET", "/v1/openapi.json")
    assert code == 200 and doc["openapi"] == "3.1.0"
    assert {p: sorted(ops) for p, ops in doc["paths"].items()} == {
        p: sorted(m.lower() for m in ms) for p, ms in ROUTES.items()}
    assert set(http(url, "GET", "/v1")[1]["routes"]) == set(doc["paths"])
    # every request each CLI sub-command makes is a documented route, its body valid by the documented schema
    parser = argparse.ArgumentParser()
    cli.add_subparser(parser.add_subparsers())
    commands = [["error", "Produce", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "--topic", "t", "--partition",
                 "0", "--version", "9", "--client-id", "c", "--broker", "1", "--count", "-1"],
                ["error", "Produce", "6"], ["error", "Produce", "6", "NONE", "--rtt", "5", "--rtt", "0"], ["drop", "Fetch", "--before", "--skip", "1"], ["latency", "1", "200"],
                ["latency", "100", "--api", "Fetch"], ["hold", "JoinGroup", "--client-id", "c"], ["holds"],
                ["release", "JoinGroup", "--count", "1"], ["release"], ["unhold", "JoinGroup"], ["unhold"],
                ["versions", "Fetch", "--max", "4"], ["versions", "ListGroups", "--remove"], ["versions"],
                ["faults"], ["clear"], ["reset"], ["reset", "--data"], ["openapi"], ["requests", "--api", "Produce", "--since", "3"],
                ["requests", "--clear"], ["call", "GET", "/v1"], ["partitions", "--topic", "t"], ["partitions"],
                ["groups", "--group", "g"], ["groups"], ["leader", "t", "0", "2"],
                ["brokers"], ["coordinator", "g", "2"], ["coordinator", "tx", "2", "--transactional"],
                ["pause-replication", "2"], ["resume-replication", "2"], ["stop", "2"], ["start", "2"], ["compact"], ["compact", "--topic", "t", "--partition", "0"],
                ["retention", "--topic", "t", "--advance-ms", "1000"], ["cut-replication", "3", "1"],
                ["heal-replication", "3", "1"], ["replication"], ["leaderless", "t", "0"], ["leaderless"],
                ["restore-leader"], ["restore-leader", "t"], ["restore-leader", "t", "0"], ["clock"],
                ["clock", "--advance-ms", "1000", "--broker", "1"],
                ["error", "Metadata", "LEADER_NOT_AVAILABLE", "--topic", "t"], ["add-broker"],
                ["add-broker", "4", "--rack", "r"], ["remove-broker", "4"], ["rack", "2", "r"], ["rack", "2"],
                ["cut-controller", "2"], ["heal-controller", "2"], ["controller"],
                ["shuffle-leaders"], ["shuffle-leaders", "t", "u", "--seed", "3"], ["shuffle-leaders", "--coordinators"],
                ["replicas", "t", "0", "3", "2"], ["follower", "t", "0", "2"], ["follower", "t", "0"], ["followers"],
                ["push-leader", "t", "0", "1", "0", "--count", "2"]]
    actions = parser._subparsers._group_actions[0].choices["control"]._subparsers._group_actions[0].choices
    assert {c[0] for c in commands} == set(actions), "a CLI sub-command this test does not check"
    for argv in commands:
        method, path, body = cli._request(parser.parse_args(["control", "--url", url, *argv]))
        op = doc["paths"][urlsplit(path).path][method.lower()]
        if body is not None:
            validate(op["requestBody"]["content"]["application/json"]["schema"], body)
    # every documented body schema is the one enforced: a property it does not list answers 400
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if "requestBody" in op:
                code, out = http(url, method.upper(), path, {"no_such_field": 1})
                assert code == 400 and "no_such_field" in out["error"], (path, method, out)


def test_reset_removes_every_control_and_empties_the_log(served):
    url = served.control_url
    for path, body in (("/v1/errors", {"api": "Produce", "error": 6}), ("/v1/drops", {"api": "Fetch"}),
                       ("/v1/latency", {"ms": 5, "api": "Produce"}), ("/v1/holds", {"api": "JoinGroup"}),
                       ("/v1/versions", {"api": "Fetch", "max_version": 4})):
        assert http(url, "POST", path, body)[0] == 200
    state = control(url, "faults")[1]
    assert all(state[k] for k in ("errors", "drops", "latency", "holds", "versions")), state
    from kafka import KafkaAdminClient
    KafkaAdminClient(bootstrap_servers=served.bootstrap_servers).close()  # something in the request log
    assert control(url, "requests")[1]["requests"]
    assert control(url, "reset")[1] == {"errors": [], "drops": [], "latency": [], "holds": [], "versions": [],
                                                    "followers": [], "metadata_leaders": []}
    assert control(url, "requests")[1]["requests"] == []
