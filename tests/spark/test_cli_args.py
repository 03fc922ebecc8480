"""`kafkite spark ...` argument parsing (no Spark started)."""
import argparse

import pytest

from kafkite.spark.cli import add_subparser, format_table


def parse(argv):
    p = argparse.ArgumentParser(prog="kafkite")
    add_subparser(p.add_subparsers(dest="cmd", required=True))
    return p.parse_args(argv)


def test_lag_args():
    a = parse(["spark", "lag", "--bootstrap-servers", "k:9092"])
    assert (a.spark_cmd, a.bootstrap_servers, a.output, a.master) == ("lag", "k:9092", None, "local[2]")
    assert a.func.__name__ == "_lag"
    assert parse(["spark", "lag", "--bootstrap-servers", "k:9092", "--output", "/tmp/x"]).output == "/tmp/x"


def test_export_args():
    a = parse(["spark", "export", "--topic", "t", "--output", "o", "--bootstrap-servers", "b:1",
               "--starting-timestamp", "5", "--ending-timestamp", "9"])
    assert (a.topic, a.output, a.starting_timestamp, a.ending_timestamp) == ("t", "o", 5, 9)
    assert a.func.__name__ == "_export"
    with pytest.raises(SystemExit):
        parse(["spark", "export", "--topic", "t", "--bootstrap-servers", "b:1"])  # --output is required


def test_export_rejects_an_empty_window(capsys):
    a = parse(["spark", "export", "--topic", "t", "--output", "o", "--bootstrap-servers", "b:1",
               "--starting-timestamp", "9", "--ending-timestamp", "9"])
    assert a.func(a) == 2
    assert "--ending-timestamp" in capsys.readouterr().err


def test_format_table():
    rows = [{"group": "g", "lag": 5}, {"group": "longer-group", "lag": None}]
    assert format_table(rows, ("group", "lag")).splitlines() == [
        "GROUP         LAG", "g             5", "longer-group  -"]
