"""Fuzzed requests against a live broker (kafkite.testing.fuzz; the long run is benchmarks/fuzz.py).

A request with a null where Kafka's schema says the field may not be null is refused while decoding,
as Kafka's generated readers do ("non-nullable field X was serialized as null"): the connection
closes with a log line and nothing of the request is applied. Then hypothesis drives mutated real-client
frames and schema-built requests with random values through every served (api, version): no handler
raises, a refused request (closed, or an error for everything) changes no state (topics, configs, log
end offsets, groups), and another connection is served throughout.
"""
from __future__ import annotations

import collections
import random
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from kafkite.server.router import supported
from kafkite.testing import fuzz
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire import codec, registry, strict

GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden-requests"
GOLDEN_FRAMES = fuzz.golden_frames(GOLDEN)
SERVED = fuzz.served()
FUZZ_SETTINGS = settings(max_examples=1500, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(HealthCheck))
FRAMES_PER_EXAMPLE = 20  # 30,000 frames a test: 10-25 s each here
SWEEP_FRAMES = 12  # schema-built frames per served (api, version) in the coverage sweep


def assert_alive(bs: str) -> None:
    with WireClient.connect(bs) as w:
        assert w.request(MetadataRequest(topics=None), 9).brokers


def broker_log(capfd) -> str:
    """What the in-process broker logged: structlog prints to stdout unless configured (kafkite.log sends a
    served broker's lines to stderr), so both."""
    cap = capfd.readouterr()
    return cap.out + cap.err


def no_handler_crash(capfd) -> None:
    """A handler that raises is caught (the connection closes) but logged as connection.error: none allowed."""
    log = broker_log(capfd)
    assert "connection.closed" in log  # the log is where this looks (some fuzzed frames were refused)
    assert "connection.error" not in log, log[log.find("connection.error") - 200:][:3000]


def create_topics_frame(topics: list[tuple[str | None, int]], version: int, null_configs: str = "") -> bytes:
    """CreateTopics; the topic named `null_configs` carries a null configs array."""
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(version=version, timeout_ms=5000, validate_only=False, topics=[
        T(name=n, num_partitions=p, replication_factor=1, assignments=[],
          configs=None if n == null_configs else []) for n, p in topics])
    req.with_header(correlation_id=7, client_id="fuzz-test")
    return bytes(req.encode(header=True, framed=True))


# -- null in a non-nullable field: refused at decode, nothing applied ---------------------------------------
@pytest.mark.parametrize("version", [0, 4, 5, 7])
@pytest.mark.parametrize("null", ["name", "configs"])
def test_create_topics_with_a_null_is_refused_whole(broker, capfd, version, null):
    bs = broker.bootstrap_servers
    topics = [("listed-before", 1), (None if null == "name" else "the-bad-one", 1), ("listed-after", 1)]
    with WireClient.connect(bs) as w:
        w.send_raw(create_topics_frame(topics, version, null_configs="the-bad-one"))
        assert w.is_closed(), f"the broker answered a CreateTopics with a null {null}"
    for name in ("listed-before", "the-bad-one", "listed-after"):
        assert broker.broker.metadata.topic(name) is None  # nothing half applied
    log = broker_log(capfd)
    assert "connection.closed" in log and f"non-nullable field topics[].{null} was serialized as null" in log
    assert "connection.error" not in log
    assert_alive(bs)  # another connection is served


def _nullable_typed_fields(message_cls, version: int):
    """(path, field) for every string/bytes/array/struct-array field reachable at this version, one level of
    struct arrays deep: (name,) at top level, (array, name) inside the first item of a struct array."""
    out = []
    for f in message_cls._struct._fields:
        if not f.for_version_q(version) or f.tagged_field_q(version):
            continue
        if f.is_struct_array():
            out.append(((f.name,), f))
            for g in f.array_of._fields:
                if g.for_version_q(version) and not g.tagged_field_q(version) and (
                        g.is_array() or g.type_str in ("string", "bytes", "records")):
                    out.append(((f.name, g.name), g))
        elif f.is_array() or f.type_str in ("string", "bytes", "records"):
            out.append(((f.name,), f))
    return out


def _frame_with_null(api: int, version: int, path: tuple[str, ...]) -> bytes | None:
    req_cls, _ = registry.classes(api)
    rng = random.Random(f"{api}-{version}-{path}")
    for _ in range(20):
        gen = fuzz.RequestGenerator(rng, null_rate=0.0)
        frame = gen.frame(api, version)
        try:
            body = codec.decode_request(frame, supported()).body
        except codec.MalformedRequest:
            continue  # e.g. a string over 32767 bytes: draw again
        target = body
        for name in path[:-1]:
            items = getattr(target, name)
            if not items:
                break
            target = items[0]
        else:
            setattr(target, path[-1], None)
            body.with_header(correlation_id=1, client_id="t")
            frame = bytes(body.encode(version=version, header=True))
            lax = req_cls.decode(frame, version=version, header=True)  # kafka-python's own reading
            for name in path[:-1]:
                lax = getattr(lax, name)[0]
            # None unless the encoder wrote something else (MetadataRequest v0 sends a null as [])
            return frame if getattr(lax, path[-1]) is None else None
    return None


def test_every_non_nullable_field_is_refused_at_decode_and_every_nullable_one_taken():
    checked = refused = 0
    for api, version in SERVED:
        req_cls, _ = registry.classes(api)
        for path, f in _nullable_typed_fields(req_cls, version):
            frame = _frame_with_null(api, version, path)
            if frame is None:
                continue
            checked += 1
            if f.nullable_for_version_q(version):
                codec.decode_request(frame, supported())  # a null where Kafka allows it decodes
            else:
                with pytest.raises(codec.MalformedRequest, match="was serialized as null"):
                    codec.decode_request(frame, supported())
                refused += 1
    assert checked > 300 and refused > 200, (checked, refused)


def test_overlong_string_and_length_past_the_frame_are_refused():
    from kafka.protocol.metadata import FindCoordinatorRequest
    req = FindCoordinatorRequest(version=3, key="g" * 40000, key_type=0)  # compact: the length fits, Kafka refuses
    req.with_header(correlation_id=1, client_id="t")
    with pytest.raises(codec.MalformedRequest, match="invalid length 40000"):
        codec.decode_request(bytes(req.encode(header=True)), supported())
    req = FindCoordinatorRequest(version=3, key="group", key_type=0)
    req.with_header(correlation_id=1, client_id="t")
    frame = bytes(req.encode(header=True))
    # the key's length says 5 bytes, then the frame ends after 2 of them (kafka-python's decoder slices short)
    short = frame[: frame.index(b"group") + 2]
    with pytest.raises(codec.MalformedRequest):
        codec.decode_request(short, supported())


# -- per-item answers, as Kafka gives them -------------------------------------------------------------------
def test_create_topics_bad_item_gets_its_error_and_the_others_proceed(broker):
    bs = broker.bootstrap_servers
    T = CreateTopicsRequest.CreatableTopic
    with WireClient.connect(bs) as w:
        req = CreateTopicsRequest(timeout_ms=5000, validate_only=False, topics=[
            T(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
            for n, p in [("good-1", 1), ("bad name!", 1), ("good-2", 2), ("dup", 1), ("dup", 1), ("zero", 0)]])
        resp = w.request(req, 5)
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {"good-1": 0, "bad name!": 17, "good-2": 0, "dup": 42, "zero": 37}
    md = broker.broker.metadata
    assert md.topic("good-1") is not None and len(md.topic("good-2").partitions) == 2
    assert md.topic("dup") is None and md.topic("zero") is None and md.topic("bad name!") is None


def test_delete_topics_checks_every_row_before_deleting_any(broker):
    """Kafka's ControllerApis.deleteTopics: duplicates and ambiguous rows are answered INVALID_REQUEST once
    and delete nothing (not: the first copy deleted, the second UNKNOWN_TOPIC_OR_PARTITION)."""
    from kafka.protocol.admin import DeleteTopicsRequest
    bs = broker.bootstrap_servers
    T = CreateTopicsRequest.CreatableTopic
    S = DeleteTopicsRequest.DeleteTopicState
    with WireClient.connect(bs) as w:
        w.request(CreateTopicsRequest(timeout_ms=5000, validate_only=False, topics=[
            T(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for n in ("twice", "by-both", "gone", "old-twice")]), 5)
        md = broker.broker.metadata
        both_id = md.topic("by-both").topic_id
        resp = w.request(DeleteTopicsRequest(timeout_ms=5000, topics=[
            S(name="twice", topic_id=None), S(name=None, topic_id=both_id), S(name="gone", topic_id=None),
            S(name="twice", topic_id=None), S(name="by-both", topic_id=None), S(name=None, topic_id=None),
            S(name="missing", topic_id=None)]), 6)
        old = w.request(DeleteTopicsRequest(timeout_ms=5000, topic_names=["old-twice", "old-twice"]), 3)
    got = [(r.name, r.error_code, r.error_message) for r in resp.responses]
    assert got == [("twice", 42, "Duplicate topic name."), ("gone", 0, None),
                   ("by-both", 42, "The provided topic name maps to an ID that was already supplied."),
                   (None, 42, "Neither topic name nor id were specified."),
                   ("missing", 3, "This server does not host this topic-partition.")]
    assert [(r.name, r.error_code) for r in old.responses] == [("old-twice", 42)]
    assert md.topic("gone") is None
    for kept in ("twice", "by-both", "old-twice"):
        assert md.topic(kept) is not None, kept


def test_create_partitions_duplicate_answered_once_and_nothing_grows(broker):
    from kafka.protocol.admin import CreatePartitionsRequest
    T = CreateTopicsRequest.CreatableTopic
    P = CreatePartitionsRequest.CreatePartitionsTopic
    with WireClient.connect(broker.bootstrap_servers) as w:
        w.request(CreateTopicsRequest(timeout_ms=5000, validate_only=False, topics=[
            T(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in ("cp-dup", "cp-ok")]),
            5)
        resp = w.request(CreatePartitionsRequest(timeout_ms=5000, validate_only=False, topics=[
            P(name="cp-dup", count=2, assignments=None), P(name="cp-ok", count=3, assignments=None),
            P(name="cp-dup", count=4, assignments=None)]), 1)
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [
        ("cp-dup", 42, "Duplicate topic name."), ("cp-ok", 0, None)]
    md = broker.broker.metadata
    assert len(md.topic("cp-dup").partitions) == 1 and len(md.topic("cp-ok").partitions) == 3


# -- the runner itself can fail -------------------------------------------------------------------------------
def test_runner_reports_a_crash_and_a_half_applied_request(monkeypatch):
    """Without the decode-time check (and the up-front records bound, which would now meet the null first) a
    null configs array reaches handle_create_topics' loop, which creates the topics listed before it and then
    raises: the runner must see both."""
    from kafkite.server.handlers import admin
    # (decode_request's decoders make the checks as they read, strict.fuse, or it keeps them beside: strict.checker)
    monkeypatch.setattr(strict, "fuse", lambda *a: None)
    monkeypatch.setattr(strict, "checker", lambda *a: lambda body: None)
    monkeypatch.setattr(codec, "_READERS", {})
    monkeypatch.setattr(admin, "_over_records_bound", lambda *a: None)
    with BrokerThread() as bt:
        runner = fuzz.FrameRunner(bt.broker)
        frame = create_topics_frame([("created-first", 1), ("second", 1)], 2, null_configs="second")[4:]
        outcome = bt.call(runner.run, frame)
    assert outcome.kind == "crash"
    kinds = set(runner.crashes)
    assert any(k.startswith("TypeError") for k in kinds), kinds
    assert "state changed by a refused api 19" in kinds, kinds


def _alter_unknown_topic_frame() -> bytes:
    """IncrementalAlterConfigs v1 of a topic that does not exist: refused (UNKNOWN_TOPIC_OR_PARTITION)."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[R(
        resource_type=2, resource_name="no-such-topic", configs=[R.AlterableConfig(
            name="retention.ms", config_operation=0, value="1000")])])
    req.with_header(correlation_id=5, client_id="fuzz-test")
    return bytes(req.encode(header=True))


@pytest.mark.parametrize("meanwhile", ["rebalance", "offsets"])
def test_runner_leaves_a_groups_own_changes_out_of_another_requests(monkeypatch, meanwhile):
    """A request that is not a group's may wait (an IncrementalAlterConfigs for its metadata write), and the groups'
    timers run meanwhile: a rebalance one of them ends is not the request's doing (benchmarks/fuzz.py's long run
    reported such ones against IncrementalAlterConfigs and Produce), a committed offset that changes is."""
    from kafkite.server import router
    lo, hi, real = router.ROUTES[44]

    async def waits_while_a_group_changes(apis, ctx):
        shard = next(s for s in apis.group_coordinator.coordinator.shards.values() if "fuzz-group" in s.groups)
        group = shard.groups["fuzz-group"]
        if meanwhile == "rebalance":  # what a rebalance ending does to the group, as its timer would
            group.generation += 1
        else:
            group.offsets.clear()
        return await real(apis, ctx)

    monkeypatch.setitem(router.ROUTES, 44, (lo, hi, waits_while_a_group_changes))
    with BrokerThread() as bt:
        bt.call(fuzz.seed, bt.broker)
        runner = fuzz.FrameRunner(bt.broker)
        outcome = bt.call(runner.run, _alter_unknown_topic_frame())
    if meanwhile == "rebalance":
        assert outcome.kind == "refused" and not runner.crashes, (outcome, runner.crashes, runner.examples)
    else:
        assert outcome.kind == "changed" and "groups[fuzz-group]" in outcome.detail, outcome
        assert set(runner.crashes) == {"state changed by a refused api 44"}, runner.crashes


def _fetch_frame(max_wait_ms: int, min_bytes: int, offset: int) -> bytes:
    from kafka.protocol.consumer import FetchRequest
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    req = FetchRequest(version=11, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                       topics=[T(topic="fuzz-a", partitions=[P(partition=0, current_leader_epoch=-1,
                                                                fetch_offset=offset, log_start_offset=-1,
                                                                partition_max_bytes=1 << 20)])])
    req.with_header(correlation_id=3, client_id="fuzz-test")
    return bytes(req.encode(header=True))


def test_runner_fails_a_slow_handler_by_its_request_and_lets_a_long_poll_wait(monkeypatch):
    """Pending is for a request that waits by what it asks (here a Fetch with max_wait_ms and min_bytes, past the
    log end); any other request not answered within slow_limit is a failure naming api, version and frame."""
    import trio
    from kafkite.server import router
    with BrokerThread(overrides={"auto.create.topics.enable": "false"}) as bt:
        bt.call(fuzz.seed, bt.broker)
        runner = fuzz.FrameRunner(bt.broker, slow_limit=0.5)
        end = bt.broker.state.replicas.logs[("fuzz-a", 0)].log_end_offset  # nothing to read there yet
        long_poll = _fetch_frame(max_wait_ms=30000, min_bytes=1, offset=end)
        assert bt.call(runner.run, long_poll).kind == "pending"
        assert bt.call(runner.run, _fetch_frame(max_wait_ms=0, min_bytes=1, offset=end)).kind == "answered"
        assert not runner.crashes

        lo, hi, real = router.ROUTES[fuzz.FETCH]

        async def stuck(apis, ctx):  # a handler that waits when the request asks for no waiting
            await trio.sleep(30)
            return await real(apis, ctx)
        monkeypatch.setitem(router.ROUTES, fuzz.FETCH, (lo, hi, stuck))
        no_wait = _fetch_frame(max_wait_ms=0, min_bytes=1, offset=end)
        outcome = bt.call(runner.run, no_wait)
        assert bt.call(runner.run, long_poll).kind == "pending"  # still: it may wait
    assert outcome.kind == "slow", outcome
    assert list(runner.crashes) == ["slow api 1 (FetchRequest) v11"], runner.crashes
    example = runner.examples["slow api 1 (FetchRequest) v11"]
    assert example.startswith("still waiting after 0.5") and example.endswith(f"frame={no_wait.hex()}"), example


def test_a_fetch_naming_no_partition_is_answered_at_once(broker):
    """Kafka answers a full Fetch with no partition at once, whatever max_wait_ms (KafkaApis.handleFetchRequest:
    `if (interesting.isEmpty) processResponseCallback(Seq.empty)`). The fuzz runner found Kafkite long-polling it."""
    import time
    from kafka.protocol.consumer import FetchRequest
    req = FetchRequest(version=11, replica_id=-1, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                       topics=[])
    with WireClient.connect(broker.bootstrap_servers) as w:
        t0 = time.monotonic()
        w.request(req, 11)
        assert time.monotonic() - t0 < 2.5  # answered at once, not after max_wait_ms (3 s)


# -- hypothesis over every served API -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def fuzz_broker():
    with BrokerThread(overrides={"auto.create.topics.enable": "false"}) as bt:
        bt.call(fuzz.seed, bt.broker)
        runner = fuzz.FrameRunner(bt.broker)
        yield bt, runner
        assert_alive(bt.bootstrap_servers)


def _run(bt, runner, frames) -> None:
    async def go():
        for f in frames:
            await runner.run(f)
    bt.call(go)
    assert not runner.crashes, "\n".join(f"{n} x {k}: {runner.examples[k][:3000]}"
                                         for k, n in runner.crashes.items())


@pytest.mark.skipif(not GOLDEN_FRAMES, reason="../shared/golden-requests not present")
@FUZZ_SETTINGS
@given(seed=st.integers(0, 2**32 - 1), index=st.integers(0, max(0, len(GOLDEN_FRAMES) - 1)))
def test_mutated_client_frames(fuzz_broker, seed, index):
    """A seed, not st.randoms(): how many draws a frame takes depends on the broker's state (names it
    knows), which hypothesis cannot replay; a seed replays the same frames."""
    bt, runner = fuzz_broker
    mut = fuzz.Mutator(random.Random(seed))
    payload = GOLDEN_FRAMES[index][2]
    _run(bt, runner, [mut.mutate(payload) for _ in range(FRAMES_PER_EXAMPLE)])


@FUZZ_SETTINGS
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(SERVED) - 1))
def test_schema_built_requests_with_random_values(fuzz_broker, seed, which):
    bt, runner = fuzz_broker
    rng = random.Random(seed)
    names = fuzz.Names()
    runner.refresh_names(names)
    gen = fuzz.RequestGenerator(rng, names)
    mut = fuzz.Mutator(rng)
    frames = [gen.join_group()] if rng.random() < 0.1 else []
    for i in range(FRAMES_PER_EXAMPLE):
        api, version = SERVED[(which + i * 17) % len(SERVED)]  # every example spans several apis
        f = gen.frame(api, version)
        frames.append(mut.mutate(f) if rng.random() < 0.25 else f)
    _run(bt, runner, frames)


def test_fuzz_reaches_every_api_version():
    """The generators and the runner reach the handler (past the decoder) of every served (api, version): a
    fixed sweep on a broker of its own, whatever else ran or in which order."""
    with BrokerThread(overrides={"auto.create.topics.enable": "false"}) as bt:
        bt.call(fuzz.seed, bt.broker)
        runner = fuzz.FrameRunner(bt.broker)
        rng = random.Random(20261123)
        names = fuzz.Names()
        runner.refresh_names(names)
        gen = fuzz.RequestGenerator(rng, names)
        mut = fuzz.Mutator(rng)
        frames = [gen.join_group() for _ in range(3)]
        for api, version in SERVED:
            frames += [gen.frame(api, version) for _ in range(SWEEP_FRAMES)]
        for _, _, payload in GOLDEN_FRAMES:
            frames += [mut.mutate(payload) for _ in range(2)]

        async def go():
            return [await runner.run(f) for f in frames]
        outcomes = bt.call(go)
        assert not runner.crashes, "\n".join(f"{n} x {k}: {runner.examples[k][:3000]}"
                                             for k, n in runner.crashes.items())
        assert_alive(bt.bootstrap_servers)
    reached = {(o.api, o.version) for o in outcomes if o.kind in ("answered", "refused", "pending")}
    assert reached >= set(SERVED), sorted(set(SERVED) - reached)
    kinds = collections.Counter(o.kind for o in outcomes)
    assert kinds["answered"] > len(SERVED) and kinds["refused"] > len(SERVED), kinds
    # only a request that may wait by what it asks is left pending (any other is a "slow" failure above)
    assert {o.api for o in outcomes if o.kind == "pending"} <= {fuzz.PRODUCE, fuzz.FETCH, fuzz.JOIN_GROUP,
                                                                fuzz.SYNC_GROUP}, kinds


# -- over real sockets: the connection path around the handlers ---------------------------------------------
def send_frame(bs: str, payload: bytes) -> None:
    host, port = bs.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        s.settimeout(2)
        try:
            s.recv(65536)  # an answer or EOF; either is fine
        except (socket.timeout, ConnectionResetError):
            pass


def test_random_bodies_for_every_api_over_sockets(broker, capfd):
    rng = random.Random(20261122)
    bs = broker.bootstrap_servers
    for api, (lo, hi) in sorted(supported().items()):
        for v in (lo, hi):
            for _ in range(4):
                body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 120)))
                header = struct.pack(">hhi", api, v, rng.randint(0, 1 << 30)) + struct.pack(">h", 4) + b"fuzz"
                if rng.random() < 0.5:
                    header += b"\x00"  # an empty tagged-field section, as flexible headers carry
                send_frame(bs, header + body)
    assert_alive(bs)
    no_handler_crash(capfd)


@pytest.mark.skipif(not GOLDEN_FRAMES, reason="../shared/golden-requests not present")
def test_mutated_golden_frames_over_sockets(broker, capfd):
    rng = random.Random(7)
    mut = fuzz.Mutator(rng)
    bs = broker.bootstrap_servers
    for _, _, payload in GOLDEN_FRAMES:
        for _ in range(4):
            send_frame(bs, mut.mutate(payload))
    assert_alive(bs)
    no_handler_crash(capfd)
