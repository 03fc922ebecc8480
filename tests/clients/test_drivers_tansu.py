"""The client drivers (Java kafka-clients, kafkajs, kcat) checked against a peer broker, Tansu 0.6.0.

These validate the drivers themselves (so a failure against Kafkite is Kafkite's, not the driver's).
Each test skips when its tool or Tansu isn't installed (.ci/install-clients.sh installs them).

What Tansu 0.6.0 (memory engine) does not do like Kafka, and so is not asserted here:
- CreateTopics accepts invalid names ("bad name") instead of INVALID_TOPIC_EXCEPTION.
- DescribeConfigs returns only the configs given at creation, all with source DEFAULT_CONFIG.
- CreatePartitions is unsupported (UnsupportedVersionException).
- ListOffsets: LATEST is below the real end offset once there are several batches; by timestamp it
  answers offset 0 with the wall-clock time (or timestamp -1, which the Java client rejects).
- InitProducerId v0-v2 (kafkajs' idempotent producer) fails with UNKNOWN_SERVER_ERROR: kafkajs
  produces with --idempotent false here.
- ListGroups leaves the state empty; DescribeGroups reports a classic group as type CONSUMER.
- kcat 1.7 / librdkafka 2.0.2 cannot read its ApiVersions v3 response (it carries four tagged
  fields; librdkafka < 2.1 mis-skips non-empty tagged fields): kcat runs through TagStripProxy.
"""
from __future__ import annotations

import base64
import json
import socket
import struct
import threading

import pytest

from clients import drivers
from clients.drivers import decode_records, records, run_java, run_kcat, run_node, summary

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def tansu():
    drivers.need("tansu")
    with drivers.tansu_broker() as bs:
        yield bs


def expected_record(i: int, key_prefix: str, src: str | None):
    headers = (("h", str(i).encode()), ("src", src.encode())) if src else ()
    return (f"{key_prefix}{i % 97}".encode(), (f"value-{i}-" + "x" * (i % 50)).encode(), headers)


def check_roundtrip(produced: dict, lines: list[dict], n: int, key_prefix: str, src: str | None):
    """The records read back are exactly the n produced, at the offsets the producer was told."""
    got = decode_records(lines)
    assert len(got) == n, summary(lines)
    by_value = {}
    for p, o, ts, k, v, h in got:
        i = int(v.split(b"-")[1])
        assert (k, v, h) == expected_record(i, key_prefix, src)
        by_value[i] = (p, o)
    assert sorted(by_value) == list(range(n))
    for p, (first, last, count) in produced["partitions"].items():
        offs = sorted(o for (pp, o) in by_value.values() if pp == int(p))
        assert len(offs) == count and offs == list(range(first, last + 1))


# -- Java kafka-clients 3.9.1 ----------------------------------------------------------------------
def test_java_admin(tansu):
    drivers.need("java")
    r = run_java("admin-create", tansu, "j-admin", 3, 1, "retention.ms=12345")
    assert r == [{"ok": True, "topic_id": r[0]["topic_id"]}] and len(r[0]["topic_id"]) == 22
    assert run_java("admin-create", tansu, "j-admin", 3, 1)[0]["error"] == "TopicExistsException"
    assert "j-admin" in run_java("admin-list", tansu)[0]["topics"]
    d = run_java("admin-describe", tansu, "j-admin")[0]
    assert d["name"] == "j-admin" and d["topic_id"] == r[0]["topic_id"] and d["internal"] is False
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]]
               for p in d["partitions"])
    assert d["configs"]["retention.ms"]["value"] == "12345"  # Tansu: source DEFAULT_CONFIG (Kafka: DYNAMIC_TOPIC_CONFIG)
    c = run_java("admin-cluster", tansu)[0]
    assert c["brokers"] == 1 and c["cluster_id"] == "tansu_cluster" and c["controller"] == c["nodes"][0]["id"]
    assert f'{c["nodes"][0]["host"]}:{c["nodes"][0]["port"]}' == tansu
    assert run_java("admin-alter-configs", tansu, "j-admin", "retention.ms=999")[0] == {"ok": True}
    assert run_java("admin-describe", tansu, "j-admin")[0]["configs"]["retention.ms"]["value"] == "999"
    assert run_java("admin-delete", tansu, "j-admin")[0] == {"ok": True}
    assert "j-admin" not in run_java("admin-list", tansu)[0]["topics"]
    assert run_java("admin-delete", tansu, "j-admin")[0]["error"] == "UnknownTopicOrPartitionException"
    assert run_java("admin-describe", tansu, "j-admin")[0]["error"] == "UnknownTopicOrPartitionException"


def test_java_usage_errors(tansu):
    drivers.need("java")
    assert run_java("no-such-command", tansu)[0]["error"] == "IllegalArgumentException"
    assert run_java("produce", tansu, "t", "5", "--acks")[0]["error"] == "IllegalArgumentException"


@pytest.mark.parametrize("codec", CODECS)
def test_java_produce_consume_assign(tansu, codec):
    drivers.need("java")
    topic = f"j-{codec}"
    assert run_java("admin-create", tansu, topic, 3, 1)[0]["ok"]
    n = 1000
    r = summary(run_java("produce", tansu, topic, n, "--acks", "all", "--compression", codec, "--headers"))
    assert r["acked"] == n and r["errors"] == 0 and r["first_error"] is None
    assert sum(c for _, _, c in r["partitions"].values()) == n and len(r["partitions"]) == 3
    lines = run_java("consume-assign", tansu, topic, n, "--timeout-ms", "30000")
    assert summary(lines) == {"consumed": n, "expected": n, "timed_out": False}
    assert all(x["tt"] == "CreateTime" for x in records(lines))
    check_roundtrip(r, lines, n, "java-", "java")


def test_java_legacy_forms(tansu):
    """The positional forms tests/clients/test_matrix.py and tests/reliability use."""
    drivers.need("java")
    assert run_java("admin", tansu, "create", "j-legacy", "2", "1")[0]["ok"] is True
    r = run_java("produce", tansu, "j-legacy", "300", "lz4", "true")[0]
    assert r["acked"] == 300 and r["errors"] == 0
    got = decode_records(run_java("consume", tansu, "j-legacy", "300"))
    assert len(got) == 300 and all(h[1] == ("src", b"java") for *_, h in got)  # headers on in the legacy form
    assert run_java("admin", tansu, "describe", "j-legacy")[0]["name"] == "j-legacy"


def test_java_produce_options(tansu):
    drivers.need("java")
    assert run_java("admin-create", tansu, "j-opts", 2, 1)[0]["ok"]
    r = summary(run_java("produce", tansu, "j-opts", 20, "--partition", 1, "--null-keys", "--value-size", 100,
                         "--timestamp-base", 1_700_000_000_000, "--timestamp-step", 1000, "--acks", "1",
                         "--idempotent", "false", "--prop", "linger.ms=0"))
    assert r["partitions"] == {"1": [0, 19, 20]}
    got = decode_records(run_java("consume-assign", tansu, "j-opts", 20, "--partition", 1))
    assert [g[1] for g in got] == list(range(20))
    assert [g[2] for g in got] == [1_700_000_000_000 + i * 1000 for i in range(20)]
    assert all(g[3] is None and len(g[4]) == 100 and g[5] == () for g in got)
    assert got[7][4].startswith(b"value-7-xx")
    # offsets-for-times: Tansu answers by wall clock, so only the "from the start" case is asserted
    assert run_java("offsets-for-times", tansu, "j-opts", 0, "--partition", 1)[0]["1"][0] == 0
    assert run_java("list-offsets", tansu, "j-opts")[0]["1"]["earliest"] == 0


def test_java_consume_group_commit(tansu):
    drivers.need("java")
    assert run_java("admin-create", tansu, "j-group", 3, 1)[0]["ok"]
    assert summary(run_java("produce", tansu, "j-group", 600))["acked"] == 600
    first = run_java("consume-group", tansu, "j-group", "jg", 400, "--commit", "--timeout-ms", "30000")
    s1 = summary(first)
    assert s1["consumed"] == 400 and len(records(first)) == 400 and s1["assignment"] == [0, 1, 2]
    assert sum(s1["committed"].values()) == 400  # each partition's commit = records read from it
    offsets = run_java("admin-group-offsets", tansu, "jg")[0]["offsets"]
    assert offsets == {f"j-group:{p}": o for p, o in s1["committed"].items()}
    second = run_java("consume-group", tansu, "j-group", "jg", 600, "--commit", "--timeout-ms", "8000")
    s2 = summary(second)
    assert s2["consumed"] == 200 and s2["timed_out"] is True
    seen = {(x["p"], x["o"]) for x in records(first)} | {(x["p"], x["o"]) for x in records(second)}
    assert len(seen) == 600  # the group resumed exactly where the commit left it
    assert "jg" in {g["group"] for g in run_java("admin-groups", tansu)[0]["groups"]}


def test_java_transaction(tansu):
    drivers.need("java")
    assert run_java("admin-create", tansu, "j-txn", 1, 1)[0]["ok"]
    r = summary(run_java("produce", tansu, "j-txn", 50, "--transactional-id", "jtx"))
    assert r["acked"] == 50 and r["errors"] == 0
    lines = run_java("consume-assign", tansu, "j-txn", 50, "--isolation", "read_committed", "--timeout-ms", "20000")
    assert summary(lines)["consumed"] == 50


# -- kafkajs 2.2.4 --------------------------------------------------------------------------------
def test_kafkajs_admin(tansu):
    drivers.need("node")
    assert run_node("admin-create", tansu, "js-admin", 2, 1, "retention.ms=5000")[0] == {"ok": True}
    assert run_node("admin-create", tansu, "js-admin", 2, 1)[0] == {"ok": False}  # kafkajs: false = it exists
    assert "js-admin" in run_node("admin-list", tansu)[0]["topics"]
    d = run_node("admin-describe", tansu, "js-admin")[0]
    assert [p["partition"] for p in d["partitions"]] == [0, 1] and d["configs"]["retention.ms"] == "5000"
    c = run_node("admin-cluster", tansu)[0]
    assert c["brokers"] == 1 and c["cluster_id"] == "tansu_cluster"
    assert run_node("admin-delete", tansu, "js-admin")[0] == {"ok": True}
    assert "js-admin" not in run_node("admin-list", tansu)[0]["topics"]
    assert run_node("admin-describe", tansu, "js-admin")[0]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


@pytest.mark.parametrize("codec", CODECS)
def test_kafkajs_produce_consume(tansu, codec):
    drivers.need("node")
    topic = f"js-{codec}"
    assert run_node("admin-create", tansu, topic, 3, 1)[0]["ok"] is True
    n = 1000
    r = run_node("produce", tansu, topic, n, "--compression", codec, "--headers", "--idempotent", "false")[-1]
    if r.get("error") == "Usage" and "not available" in r["message"]:
        pytest.skip(r["message"])  # the optional codec package did not install
    assert r["acked"] == n and r["errors"] == 0, r
    lines = run_node("consume-assign", tansu, topic, n, "--timeout-ms", "30000")
    assert summary(lines) == {"consumed": n, "expected": n, "timed_out": False}
    check_roundtrip(r, lines, n, "js-", "js")


def test_kafkajs_reads_java_and_back(tansu):
    """Same topic, both drivers: kafkajs reads Java's zstd/snappy batches and Java reads kafkajs' lz4 ones."""
    drivers.need("node", "java")
    assert run_java("admin-create", tansu, "x-clients", 1, 1)[0]["ok"]
    assert summary(run_java("produce", tansu, "x-clients", 100, "--compression", "zstd"))["acked"] == 100
    assert summary(run_java("produce", tansu, "x-clients", 100, "--compression", "snappy"))["acked"] == 100
    assert summary(run_node("produce", tansu, "x-clients", 100, "--compression", "lz4",
                            "--idempotent", "false"))["acked"] == 100
    js = decode_records(run_node("consume-assign", tansu, "x-clients", 300))
    java = decode_records(run_java("consume-assign", tansu, "x-clients", 300))
    assert len(js) == 300 and sorted(js) == sorted(java)


def test_kafkajs_consume_group_commit(tansu):
    drivers.need("node")
    assert run_node("admin-create", tansu, "js-group", 3, 1)[0]["ok"] is True
    assert summary(run_node("produce", tansu, "js-group", 300, "--idempotent", "false"))["acked"] == 300
    s = summary(run_node("consume-group", tansu, "js-group", "jsg", 200, "--commit", "--timeout-ms", "30000"))
    assert s["consumed"] == 200 and s["assignment"] == [0, 1, 2]
    committed = {k: v for k, v in s["committed"].items() if v >= 0}
    assert sum(committed.values()) == 200
    offs = run_node("admin-group-offsets", tansu, "jsg", "js-group")[0]["offsets"]
    assert {k: v for k, v in offs.items() if v >= 0} == {f"js-group:{p}": o for p, o in committed.items()}


# -- kcat (librdkafka 2.0.2) ----------------------------------------------------------------------
class TagStripProxy:
    """A TCP proxy that drops the tagged fields of ApiVersions v3+ responses, which librdkafka < 2.1
    cannot skip; everything else passes through unchanged."""

    def __init__(self, upstream_port: int, port: int, host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.sock = socket.create_server((host, port))
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.stopped = True
        self.sock.close()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.upstream)
            except OSError:
                c.close()
                continue
            pending: dict[int, int] = {}
            threading.Thread(target=self._pump, args=(c, u, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, pending, False), daemon=True).start()

    @staticmethod
    def _frame(s):
        head = drivers._recv_exact(s, 4)
        return head + drivers._recv_exact(s, struct.unpack(">i", head)[0])

    def _pump(self, src, dst, pending, requests):
        try:
            while True:
                f = self._frame(src)
                if requests:
                    key, ver, corr = struct.unpack(">hhi", f[4:12])
                    if key == 18 and ver >= 3:
                        pending[corr] = ver
                elif pending.pop(struct.unpack(">i", f[4:8])[0], None) is not None:
                    f = self._strip(f)
                dst.sendall(f)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _strip(f: bytes) -> bytes:
        def uvarint(i):
            v = shift = 0
            while True:
                b = f[i]
                i += 1
                v |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    return v, i

        def skip_tags(i):
            n, i = uvarint(i)
            for _ in range(n):
                _, i = uvarint(i)
                size, i = uvarint(i)
                i += size
            return i
        i = 4 + 4 + 2                      # size, correlation id, error code
        n, i = uvarint(i)                  # compact array of api keys: N + 1
        for _ in range(max(n - 1, 0)):
            i = skip_tags(i + 6)           # key, min, max, then the entry's tags
        i += 4                             # throttle time
        body = f[4:i] + b"\x00"            # no tagged fields
        return struct.pack(">i", len(body)) + body


@pytest.fixture(scope="module")
def tansu_for_kcat():
    """Tansu advertising a TagStripProxy in front of it, so every kcat connection goes through the proxy.
    Yields (bootstrap via the proxy, the direct listener)."""
    drivers.need("tansu", "kcat")
    proxy_port = drivers.free_port()
    with drivers.tansu_broker(advertised_port=proxy_port) as direct:
        proxy = TagStripProxy(int(direct.rsplit(":", 1)[1]), proxy_port)
        try:
            yield f"127.0.0.1:{proxy_port}", direct
        finally:
            proxy.close()


def test_kcat_direct_is_refused_by_librdkafka_2_0(tansu):
    """Documents the incompatibility TagStripProxy works around (kcat gives up on ApiVersions)."""
    drivers.need("kcat")
    r = run_kcat("-b", tansu, "-L", "-m", "3", timeout=30)
    if r.returncode == 0:
        pytest.skip("this kcat reads Tansu's ApiVersions response: no proxy needed")
    assert b"ApiVersion" in r.stderr or b"transport failure" in r.stderr.lower(), r.stderr


def test_kcat_metadata(tansu_for_kcat):
    bs, direct = tansu_for_kcat
    drivers.need("java")
    assert run_java("admin-create", direct, "kc-md", 4, 1)[0]["ok"]
    r = run_kcat("-b", bs, "-L", "-t", "kc-md", timeout=60)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert 'topic "kc-md" with 4 partitions' in text and f"at {bs}" in text
    md = json.loads(run_kcat("-b", bs, "-L", "-J", timeout=60).stdout)
    assert "kc-md" in {t["topic"] for t in md["topics"]}


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(tansu_for_kcat, codec):
    bs, direct = tansu_for_kcat
    topic = f"kc-{codec}"
    drivers.need("java")
    assert run_java("admin-create", direct, topic, 1, 1)[0]["ok"]
    n = 1000
    lines = b"".join(b"key%d:value-%d\n" % (i % 13, i) for i in range(n))
    r = run_kcat("-b", bs, "-P", "-t", topic, "-K", ":", "-z", codec, "-H", "src=kcat", "-X", "acks=all",
                 input=lines, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run_kcat("-b", bs, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k|%s|%o|%h\n", timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode().splitlines()
    assert out == [f"key{i % 13}|value-{i}|{i}|src=kcat" for i in range(n)]
    # and the Java client reads kcat's batches
    got = decode_records(run_java("consume-assign", direct, topic, n))
    assert [(g[1], g[3], g[4], g[5]) for g in got] == [
        (i, b"key%d" % (i % 13), b"value-%d" % i, (("src", b"kcat"),)) for i in range(n)]


def test_records_are_base64():
    line = {"p": 0, "o": 5, "ts": 1, "k": None, "v": base64.b64encode(b"\x00\xff").decode(), "h": [["a", None]]}
    assert decode_records([line, {"consumed": 1}]) == [(0, 5, 1, None, b"\x00\xff", (("a", None),))]
