"""`kafkite serve` as a process: ready fast, signals, and the admin commands."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from helpers import start_serve
from kafkite.cli import build_parser

KAFKITE = [sys.executable, "-m", "kafkite.cli"]


def test_serve_ready_and_sigterm():
    t0 = time.monotonic()
    proc, bootstrap = start_serve("--in-memory")
    elapsed = time.monotonic() - t0
    try:
        # ready, not hung: the start-up time itself (about 0.9 s idle) is a benchmark figure, not a timed test
        assert elapsed < 20, f"ready after {elapsed:.2f}s"
        out = subprocess.run(KAFKITE + ["topics", "create", "clitopic", "--partitions", "2",
                                        "--config", "retention.ms=1000", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        out = subprocess.run(KAFKITE + ["topics", "create", "clitopic", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and "TopicAlreadyExists" in out.stderr
        out = subprocess.run(KAFKITE + ["topics", "list", "--bootstrap-servers", bootstrap],  # the alias
                             capture_output=True, text=True, timeout=60)
        assert "clitopic" in out.stdout.split()
        out = subprocess.run(KAFKITE + ["topics", "describe", "clitopic", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert "PartitionCount: 2" in out.stdout and "retention.ms=1000" in out.stdout, out.stdout + out.stderr
        out = subprocess.run(KAFKITE + ["cluster", "describe", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert '"cluster_id"' in out.stdout
        out = subprocess.run(KAFKITE + ["topics", "delete", "clitopic", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        out = subprocess.run(KAFKITE + ["topics", "delete", "clitopic", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and "UnknownTopicOrPartition" in out.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_serve_default_data_dir_is_local(tmp_path):
    proc, bootstrap = start_serve(cwd=tmp_path)
    try:
        assert (tmp_path / "kafkite-data" / "meta.properties").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    assert (tmp_path / "kafkite-data").is_dir()


def test_serve_three_brokers():
    proc, bootstrap = start_serve("--in-memory", "--brokers", "3")
    try:
        assert len(bootstrap.split(",")) == 3
        from kafka.admin import KafkaAdminClient, NewTopic
        a = KafkaAdminClient(bootstrap_servers=bootstrap)
        a.create_topics([NewTopic("three", 3, 3)])
        assert len(a.describe_cluster()["brokers"]) == 3
        leaders = {p["leader_id"] for p in a.describe_topics(["three"])[0]["partitions"]}
        assert leaders == {1, 2, 3}
        a.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_serve_with_server_properties_and_overrides(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# Kafka-style config\nbroker.id=7\nnum.partitions=3\nlog.retention.hours=1\n"
                     "auto.create.topics.enable=true\n")
    proc, bootstrap = start_serve("--in-memory", "--config", str(props), "--override", "auto.create.topics.enable=false")
    try:
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
        from kafka.protocol.metadata import MetadataRequest
        from kafkite.testing.wire_client import WireClient
        a = KafkaAdminClient(bootstrap_servers=bootstrap)
        assert [b["broker_id"] for b in a.describe_cluster()["brokers"]] == [7]
        a.create_topics([NewTopic("props", -1, -1)])
        assert len(a.describe_topics(["props"])[0]["partitions"]) == 3  # num.partitions from the file
        cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "props")], config_filter="all")
        assert cfg["topic"]["props"]["retention.ms"]["value"] == "3600000"  # log.retention.hours=1
        a.close()
        with WireClient.connect(bootstrap) as w:  # the override wins over the file
            r = w.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto-x")],
                                          allow_auto_topic_creation=True), 9)
            assert r.topics[0].error_code == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


@pytest.mark.parametrize("argv, dest", [
    (["topics", "list"], "bootstrap_server"),
    (["topics", "create", "t"], "bootstrap_server"),
    (["groups", "describe", "g"], "bootstrap_server"),
    (["cluster", "describe"], "bootstrap_server"),
    (["spark", "lag"], "bootstrap_servers"),
    (["spark", "export", "--topic", "t", "--output", "o"], "bootstrap_servers"),
])
@pytest.mark.parametrize("flag", ["--bootstrap-server", "--bootstrap-servers"])
def test_every_subcommand_takes_bootstrap_server_and_its_alias(argv, dest, flag):
    args = build_parser().parse_args([*argv, flag, "h:1,h:2"])
    assert getattr(args, dest) == "h:1,h:2"


@pytest.mark.parametrize("argv", [["topics"], ["groups"], ["cluster"], ["spark", "lag"], ["spark", "export"]])
def test_help_names_bootstrap_server(argv, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    usage = capsys.readouterr().out.split("options:")[0]
    assert "--bootstrap-server HOST:PORT,..." in usage and "--bootstrap-servers" not in usage


@pytest.mark.parametrize("argv, message", [
    (["topics", "create", "t", "--config", "retention.ms"], "--config expects key=value, got 'retention.ms'"),
    (["groups", "configs", "g", "--add-config", "consumer.session.timeout.ms"],
     "--add-config expects key=value, got 'consumer.session.timeout.ms'"),
])
def test_a_config_without_a_value_is_a_usage_error(argv, message, capsys):
    """Answered before any broker is asked (the bootstrap server here does not exist), not a traceback."""
    from kafkite.cli import main
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert message in capsys.readouterr().err
