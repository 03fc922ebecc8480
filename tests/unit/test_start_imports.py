"""What `kafkite serve` imports at start: libraries and subsystems only some features need are imported when first
used (issue 24 item 5: idle RSS and start-up time). A real `kafkite serve` process, run under `python -X importtime`
(every module it imports, on stderr as it goes), must not have imported them when it logs "ready"."""
from __future__ import annotations

import re
import subprocess
import sys
import time

# scramp, asn1crypto: SCRAM credentials; re2: KIP-848 regex subscriptions; kafka.admin/consumer/producer/net/...:
# kafka-python's client half, which its package __init__ imports (wire/lazy_kafka.py leaves it out); urllib.request,
# http.client: the `kafkite control` client; kafka.record, kafka.codec and the codec libraries: decoding records and
# compressed batches (storage/batch.py, storage/compression.py); crc32c (and importlib.metadata, which its __init__
# imports): the first CRC (storage/batch.py crc32c_of); the other sub-commands' parsers and what they import (cli.py
# build_parser(only="serve")), the control plane and the testing helpers (only with --control-port); the admin APIs'
# classes; every API's request and response classes (the handlers import them on their API's first request:
# wire/lazy_kafka.py lazy_names); KIP-848's consumer groups and the group coordinator's shard (the first load of a
# __consumer_offsets partition, the first ConsumerGroupHeartbeat or ConsumerGroupDescribe); the segment files'
# modules (the first FileLog: never with --in-memory); the controller-to-broker APIs' classes (a cluster's first
# controller request, ISR change or markers sent to another broker); ssl, hashlib, hmac, asyncio, idna, zipfile: what
# trio and structlog import for features a broker uses only with TLS or SCRAM, or never (kafkite/lazy_modules.py)
LAZY = ("ssl", "_ssl", "hashlib", "_hashlib", "hmac", "asyncio", "idna", "zipfile", "scramp", "asn1crypto", "re2", "kafka.admin", "kafka.consumer", "kafka.producer", "kafka.net",
        "kafka.metrics", "kafka.coordinator", "kafka.cluster", "kafka.serializer", "kafka.partitioner",
        "urllib.request", "http.client", "kafka.record", "kafka.codec", "lz4", "snappy", "cramjam", "zstandard",
        "gzip", "crc32c", "importlib.metadata", "email",
        "kafkite.control", "kafkite.spark", "kafkite.testing", "kafkite.users_cli", "kafkite.acls_cli",
        "kafka.protocol.admin.acl", "kafka.protocol.admin.configs", "kafka.protocol.admin.users",
        "kafka.protocol.admin.client_quotas", "kafka.protocol.admin.transactions", "kafka.protocol.admin",
        "kafka.protocol.consumer", "kafka.protocol.producer", "kafka.protocol.metadata", "kafka.protocol.sasl",
        "kafkite.wire.consumer_group_api", "kafkite.coordinator.shard", "kafkite.coordinator.consumer_group",
        "kafkite.coordinator.consumer_group_manager", "kafkite.coordinator.consumer_group_migration",
        "kafkite.coordinator.consumer_group_records", "kafkite.coordinator.consumer_protocol",
        "kafkite.coordinator.reconciliation", "kafkite.coordinator.regex_refresh", "kafkite.coordinator.regex",
        "kafkite.storage.log_loader", "kafkite.storage.file_log_segment", "kafkite.storage.offset_index",
        "kafkite.storage.offset_index_check", "kafkite.storage.time_index", "kafkite.storage.active_segment",
        "kafkite.storage.segment_deletion", "kafkite.wire.interbroker",
        "kafkite.controller.zk_requests")
_IMPORT = re.compile(r"import time:\s+\d+ \|\s+\d+ \| +(\S+)$")


def serve_start_modules() -> set[str]:
    """The modules a `kafkite serve --in-memory` imported up to its "ready" line."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "kafkite.cli", "serve", "--port", "0",
                             "--in-memory"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    mods, tail = set(), []
    try:
        deadline = time.monotonic() + 120
        for line in proc.stderr:
            m = _IMPORT.match(line.rstrip("\n"))
            if m:
                mods.add(m.group(1))
                continue
            tail.append(line)
            if re.search(r"\bready\b", line):
                return mods
            assert time.monotonic() < deadline, "no ready line in 120 s"
        raise AssertionError("kafkite serve ended before ready: " + "".join(tail[-20:]))
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_start_does_not_import_feature_libraries():
    mods = serve_start_modules()
    assert "kafkite.server.broker" in mods and "kafka.protocol.api_message" in mods  # (the reader reads it right)
    loaded = sorted(m for m in mods if m in LAZY or any(m.startswith(lazy + ".") for lazy in LAZY))
    assert loaded == [], loaded


def test_the_lazy_libraries_still_load_when_used():
    from kafkite.coordinator.regex import InvalidRegularExpression, check_regex, resolve
    from kafkite.security.scram import credential_from_password
    assert resolve("t.*", ["t1", "x", "__consumer_offsets"]) == {"t1"}
    try:
        check_regex("a(")
        raise AssertionError("RE2 accepted 'a('")
    except InvalidRegularExpression as e:
        assert "missing closing )" in str(e)
    assert len(credential_from_password("SCRAM-SHA-256", "pw", 4096).stored_key) == 32


def test_kafka_package_without_its_init_still_serves_its_own_names():
    """wire/lazy_kafka.py: kafka.protocol imports without kafka-python's client half; the package's own names
    (KafkaConsumer, __version__, a submodule by `from kafka import`) still come when asked."""
    code = """if True:
        import sys
        from kafkite.wire.lazy_kafka import install
        assert install() and not install()
        import kafka.protocol.metadata, kafka.errors
        from kafka import codec
        assert codec is sys.modules["kafka.codec"]
        assert "kafka.admin" not in sys.modules and "kafka.consumer" not in sys.modules
        import kafka
        from kafka import KafkaConsumer, KafkaAdminClient
        assert KafkaConsumer.__module__ == "kafka.consumer.group" and "kafka.admin" in sys.modules
        assert kafka.__version__.startswith("3.") and "KafkaProducer" in kafka.__all__
        assert not hasattr(kafka, "no_such_name")
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


def test_kafka_protocol_admin_without_its_init_still_serves_its_own_names():
    """The same for kafka.protocol.admin, whose __init__ imports every admin API's classes."""
    code = """if True:
        import sys
        from kafkite.wire.lazy_kafka import install
        install()
        from kafka.protocol.admin.groups import ListGroupsResponse
        import kafka.protocol.admin.cluster
        assert "kafka.protocol.admin.acl" not in sys.modules and "kafka.admin" not in sys.modules
        import kafka.protocol.admin as admin
        assert kafka.protocol.admin is admin is sys.modules["kafka.protocol.admin"]
        from kafka.protocol.admin import CreateAclsRequest
        assert CreateAclsRequest.__module__ == "kafka.protocol.admin.acl" and "ListGroupsResponse" in admin.__all__
        assert admin.ListGroupsResponse is ListGroupsResponse and admin.cluster is kafka.protocol.admin.cluster
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


def test_lazy_standard_modules_run_at_their_first_use_and_then_are_whole():
    """kafkite/lazy_modules.py: `import ssl` binds the module without running it; its first use runs it once (from
    two threads at once too), into the module every importer holds; a package's submodule imports without its
    __init__; trio and structlog work with them lazy, TLS and SCRAM included."""
    code = """if True:
        import sys, threading
        from kafkite.lazy_modules import LIBRARIES, install
        assert install() == list(LIBRARIES) and install() == []
        import trio, structlog, ssl, hashlib, asyncio.events
        assert "_ssl" not in sys.modules and "_hashlib" not in sys.modules and "asyncio.base_events" not in sys.modules
        got = []
        ts = [threading.Thread(target=lambda: got.append(ssl.create_default_context())) for _ in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert len(got) == 4 and all(isinstance(c, ssl.SSLContext) for c in got) and "_ssl" in sys.modules
        assert sys.modules["ssl"] is ssl and ssl.SSLContext.__module__ == "ssl" and not hasattr(ssl, "no_such_name")
        from kafkite.security.scram import credential_from_password
        assert len(credential_from_password("SCRAM-SHA-512", "pw", 4096).stored_key) == 64
        assert hashlib.sha256(b"").hexdigest().startswith("e3b0c442")
        async def main():
            return 7
        assert asyncio.run(main()) == 7 and asyncio.events is sys.modules["asyncio.events"]
        import idna, zipfile
        assert idna.encode("b\u00fccher.example") == b"xn--bcher-kva.example" and zipfile.ZipFile
        async def trio_main():
            await trio.sleep(0)
            return 8
        assert trio.run(trio_main) == 8
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


def test_a_lazy_module_that_fails_to_run_fails_every_use(tmp_path, monkeypatch):
    """As a failed import does: the error at the first use, an ImportError naming it at every later one."""
    import pytest

    from kafkite.lazy_modules import lazy_module
    (tmp_path / "kafkite_lazy_broken.py").write_text("x = 1\nraise RuntimeError('no library')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kafkite_lazy_broken", raising=False)
    assert lazy_module("kafkite_lazy_broken")
    try:
        import kafkite_lazy_broken as m  # (binds it: nothing runs yet)
        with pytest.raises(RuntimeError, match="no library"):
            m.y
        with pytest.raises(ImportError, match="kafkite_lazy_broken.*failed to load.*no library"):
            m.y
    finally:
        sys.modules.pop("kafkite_lazy_broken", None)


def test_serve_gives_the_c_heap_back_after_start_where_there_is_glibc():
    import platform

    from kafkite.app import trim_malloc
    assert trim_malloc() is (platform.libc_ver()[0] == "glibc")


def test_serve_trims_the_c_heap_periodically_in_a_worker_thread(monkeypatch):
    """trim_malloc_every calls malloc_trim(0) every interval, off the event loop's thread; KAFKITE_MALLOC_TRIM_S sets
    the interval (60 s by default, 0: off) and anything else stops the start."""
    import threading

    import pytest
    import trio

    from kafkite.app import malloc_trim_interval, trim_malloc_every
    from kafkite.config import ConfigError
    calls = []

    def fake_trim(pad):
        calls.append((pad, threading.current_thread() is threading.main_thread()))

    async def three_trims():  # or 10 s
        with trio.move_on_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trim_malloc_every, 0.02, fake_trim)
                while len(calls) < 3:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()

    trio.run(three_trims)
    assert len(calls) >= 3 and set(calls) == {(0, False)}, calls
    calls.clear()
    trio.run(trim_malloc_every, 0, fake_trim)  # off: returns at once
    assert calls == []
    monkeypatch.delenv("KAFKITE_MALLOC_TRIM_S", raising=False)
    assert malloc_trim_interval() == 60.0
    for raw, want in (("0", 0.0), ("2.5", 2.5)):
        monkeypatch.setenv("KAFKITE_MALLOC_TRIM_S", raw)
        assert malloc_trim_interval() == want
    for raw in ("-1", "soon", "nan"):
        monkeypatch.setenv("KAFKITE_MALLOC_TRIM_S", raw)
        with pytest.raises(ConfigError, match="KAFKITE_MALLOC_TRIM_S must be"):
            malloc_trim_interval()


def test_serve_parses_its_arguments_as_the_whole_command_line_does():
    """`kafkite serve` builds the serve sub-command's parser alone (cli.build_parser(only="serve")): the same usage
    line, the same arguments and defaults."""
    from kafkite.cli import COMMANDS, build_parser
    whole, alone = build_parser(), build_parser(only="serve")
    assert tuple(whole._subparsers._group_actions[0].choices) == COMMANDS
    assert alone.format_usage() == whole.format_usage()
    argv = ["serve", "--port", "0", "--in-memory", "--override", "a=b", "--gc-freeze", "off"]
    assert vars(alone.parse_args(argv)) == vars(whole.parse_args(argv))
    serve = whole._subparsers._group_actions[0].choices["serve"]
    assert alone._subparsers._group_actions[0].choices["serve"].format_help() == serve.format_help()


def test_a_lazy_package_is_whole_for_a_thread_that_asks_while_another_runs_its_init(tmp_path, monkeypatch):
    """wire/lazy_kafka.py: while one thread runs a lazy package's __init__ (its first use), another thread asking
    for one of its names waits for the __init__ to finish, as an import in progress makes it wait, rather than find
    the names not yet there."""
    import threading

    from kafkite.wire.lazy_kafka import _lazy_package
    pkg = tmp_path / "kafkite_lazy_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import threading\nentered, release = threading.Event(), threading.Event()\n"
                                     "import builtins\nbuiltins._kafkite_lazy_probe = (entered, release)\n"
                                     "entered.set()\nrelease.wait(10)\nVALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins
    try:
        assert _lazy_package("kafkite_lazy_probe")
        module = sys.modules["kafkite_lazy_probe"]
        got = {}

        def use(who):
            try:
                got[who] = module.VALUE
            except AttributeError as exc:
                got[who] = exc
        first = threading.Thread(target=use, args=("first",))
        first.start()
        for _ in range(200):  # the first thread is in the __init__
            if hasattr(builtins, "_kafkite_lazy_probe") and builtins._kafkite_lazy_probe[0].is_set():
                break
            first.join(0.05)
        second = threading.Thread(target=use, args=("second",))
        second.start()
        second.join(0.3)  # (it waits: still running; before, it failed at once)
        builtins._kafkite_lazy_probe[1].set()
        first.join(10)
        second.join(10)
        assert got == {"first": 1, "second": 1}, got
    finally:
        sys.modules.pop("kafkite_lazy_probe", None)
        if hasattr(builtins, "_kafkite_lazy_probe"):
            builtins._kafkite_lazy_probe[1].set()
            del builtins._kafkite_lazy_probe


def test_a_lazy_name_imports_on_first_use_and_then_is_the_class_itself():
    """wire/lazy_kafka.py lazy_names: a handler module's response class is imported on its first call, attribute
    or subscript, and then the module's global is the class itself (no stand-in left on the request path)."""
    code = """if True:
        import sys
        from kafkite.wire.lazy_kafka import LazyName, install, lazy_names
        install()
        ns = {}
        ns["FetchRequest"], ns["FetchResponse"] = lazy_names(
            ns, "kafka.protocol.consumer.fetch", "FetchRequest", "FetchResponse")
        assert "kafka.protocol.consumer.fetch" not in sys.modules and "kafka.protocol.consumer.group" not in sys.modules
        req = ns["FetchRequest"][12](replica_id=1, max_wait_ms=0, min_bytes=1, topics=[])
        from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
        assert ns["FetchRequest"] is FetchRequest and type(req).__name__ == "FetchRequest" and req.version == 12
        assert ns["FetchResponse"] is FetchResponse  # (a name of the same lazy_names: replaced too)
        assert "kafka.protocol.consumer.group" not in sys.modules  # (the package's other modules: not imported)
        (wrong,) = lazy_names({}, "kafka.protocol.consumer.fetch", "ListOffsetsResponse")
        try:
            wrong.ListOffsetsTopicResponse
            raise AssertionError("no ImportError")
        except ImportError as e:
            assert "ListOffsetsResponse" in str(e)
        ns["ListOffsetsResponse"] = "something else"
        (L,) = lazy_names(ns, "kafka.protocol.consumer.offsets", "ListOffsetsResponse")
        T = L.ListOffsetsTopicResponse
        from kafka.protocol.consumer.offsets import ListOffsetsResponse
        assert ns["ListOffsetsResponse"] == "something else"  # (only a stand-in is replaced)
        assert T is ListOffsetsResponse.ListOffsetsTopicResponse
        r = L(version=7, throttle_time_ms=0, topics=[])
        assert type(r) is ListOffsetsResponse
        from kafkite.server.handlers import metadata
        assert isinstance(metadata.ApiVersionsResponse, LazyName)
        answer = metadata.api_versions_response(3, {18: (0, 4)})
        from kafka.protocol.metadata.api_versions import ApiVersionsResponse
        assert metadata.ApiVersionsResponse is ApiVersionsResponse and type(answer) is ApiVersionsResponse
        assert [(k.api_key, k.max_version) for k in answer.api_keys] == [(18, 4)]
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


def test_the_group_coordinator_imports_kip_848_on_first_use():
    """coordinator.py's KIP-848 names (lazy_names): a describe before any shard, an invalid heartbeat answered by the
    GroupError an except clause names (its sibling check_heartbeat imported it), then a shard loaded."""
    code = """if True:
        import sys
        from kafkite.coordinator.coordinator import Config, GroupCoordinator
        from kafkite.wire.errors import E
        assert "kafkite.coordinator.shard" not in sys.modules
        assert "kafkite.coordinator.consumer_group_manager" not in sys.modules
        c = GroupCoordinator(Config(num_partitions=1))
        from kafkite.server.handlers import groups
        req = groups.HeartbeatRequest(group_id="g", member_id="", member_epoch=1)
        shard, result = c.consumer_group_heartbeat(req, lambda name: None, 0, api_version=0)
        assert shard is None and result.response.error == E.INVALID_REQUEST, result.response
        assert result.response.message == "MemberId can't be empty."
        assert "kafkite.coordinator.shard" not in sys.modules
        assert c.describe_group("g").error == E.NOT_COORDINATOR
        c.begin_loading(0, 0)
        c.finish_loading(0, 0)
        d = c.describe_group("g")
        assert (d.error, d.state) == (E.GROUP_ID_NOT_FOUND, "Dead"), d
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr
