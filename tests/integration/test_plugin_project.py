"""The plugin as a user meets it: a project of its own (none of our pytest configuration) using the fixtures."""
from __future__ import annotations

import subprocess
import sys
import textwrap

USER_TESTS = '''
import time
import warnings

import pytest


@pytest.mark.parametrize("i", range(5))
def test_roundtrip(kafka_bootstrap, i):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    topic = f"t{i}"
    a = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    a.create_topics([NewTopic(topic, 1, 1)])
    a.close()
    p = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    p.send(topic, b"hi").get(timeout=30)
    p.close()
    c = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id="g", auto_offset_reset="earliest",
                      consumer_timeout_ms=60_000)
    # subscribed once it knows the topic's partitions (as the suite's helpers.kp_group_consumer: kafka-python
    # 3.0.12 can leave a rejoin's answer unread after an assignment made without them, and never read)
    deadline = time.monotonic() + 30
    while not c.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.05)
    c.subscribe([topic])
    assert next(iter(c)).value == b"hi"
    c.commit()
    c.close()


def test_users_own_deprecation_still_shows(kafka_bootstrap):
    warnings.warn("the user's own deprecated call", DeprecationWarning)
'''


def test_fixtures_do_not_flood_a_users_run_with_kafka_deprecation_warnings(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the user's project: no filterwarnings of ours
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rw", "test_user.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    report = out.stdout + out.stderr
    assert out.returncode == 0, report
    assert "6 passed, 1 warning" in report, report
    assert "the user's own deprecated call" in report
    assert "kafka/" not in report and "is deprecated" not in report, report
