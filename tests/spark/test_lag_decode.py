"""The lag pipeline's pure DataFrame functions on a local SparkSession (no Kafka connector):
decode_offsets_df on hand-encoded records in Kafka's formats, latest_commits, compute_lag."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")

from offsets_format import group_metadata_key, offset_commit_key, offset_commit_value  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from kafkite.spark.lag import (END_OFFSETS_SCHEMA, LAG_COLUMNS, RAW_SCHEMA, compute_lag,  # noqa: E402
                               decode_offsets_df, latest_commits)


def raw_df(spark, rows):
    """rows: (key, value, log offset) in one __consumer_offsets partition, or (key, value, partition, offset)."""
    rows = [r if len(r) == 4 else (r[0], r[1], 0, r[2]) for r in rows]
    return spark.createDataFrame(rows, RAW_SCHEMA)


def decoded(spark, rows):
    return [tuple(r) for r in decode_offsets_df(raw_df(spark, rows)).orderBy("log_partition", "log_offset").collect()]


def latest(spark, rows):
    return {(r.group, r.topic, r.partition): r.committed_offset
            for r in latest_commits(decode_offsets_df(raw_df(spark, rows))).collect()}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_value_version(spark_local, version):
    rows = [(offset_commit_key("g", "t", 0), offset_commit_value(42, version, leader_epoch=7), 0),
            (offset_commit_key("g", "t", 1), offset_commit_value(2**40 + 3, version, metadata="m" * 300,
                                                                  expire_timestamp=123), 1)]
    assert decoded(spark_local, rows) == [("g", "t", 0, 42, 0, 0), ("g", "t", 1, 2**40 + 3, 0, 1)]


def test_key_versions_names_and_extreme_numbers(spark_local):
    long_group = "grüppe-" + "x" * 400  # a length needing both bytes of the int16
    rows = [(offset_commit_key("g0", "t", 3, version=0), offset_commit_value(1, 0), 5, 0),
            (offset_commit_key(long_group, "töpic.ü_1", 70000), offset_commit_value(2**63 - 1), 5, 1),
            (offset_commit_key("g-neg", "t", 0), offset_commit_value(-1, 3), 5, 2),
            (offset_commit_key("", "t", 0), offset_commit_value(0, 3), 5, 3)]
    assert decoded(spark_local, rows) == [
        ("g0", "t", 3, 1, 5, 0), (long_group, "töpic.ü_1", 70000, 2**63 - 1, 5, 1),
        ("g-neg", "t", 0, -1, 5, 2), ("", "t", 0, 0, 5, 3)]


def test_tombstones_decode_to_null_and_other_records_are_ignored(spark_local):
    import struct
    rows = [(offset_commit_key("g", "t", 0), None, 0),                       # offset tombstone: kept, null
            (group_metadata_key("g"), b"\x00\x03" + b"\x00" * 20, 1),         # group metadata
            (group_metadata_key("g"), None, 2),                               # group tombstone
            (struct.pack(">h", 5) + b"\x00\x01g", b"\x00\x00", 3),             # a newer coordinator record
            (offset_commit_key("g", "t", 1), b"\x00\x09" + offset_commit_value(9)[2:], 4),  # unknown version
            (offset_commit_key("g", "t", 2), offset_commit_value(9, 4), 5)]
    assert decoded(spark_local, rows) == [("g", "t", 0, None, 0, 0), ("g", "t", 2, 9, 0, 5)]


def test_newest_by_log_offset_wins_whatever_the_row_order(spark_local):
    k = offset_commit_key("g", "t", 0)
    rows = [(k, offset_commit_value(30), 7), (k, offset_commit_value(10), 3), (k, offset_commit_value(20), 5)]
    assert latest(spark_local, rows) == {("g", "t", 0): 30}


def test_tombstone_hides_a_partition_and_a_later_commit_brings_it_back(spark_local):
    def k(g, p):
        return offset_commit_key(g, "t", p)
    rows = [(k("a", 0), offset_commit_value(5), 0), (k("a", 1), offset_commit_value(6), 1),
            (k("a", 0), None, 2),                                      # a's partition 0 deleted
            (k("b", 0), offset_commit_value(1), 3), (k("b", 0), None, 4),
            (k("b", 0), offset_commit_value(8), 5),                    # b committed again after deletion
            (k("c", 0), offset_commit_value(3), 6), (k("c", 1), offset_commit_value(4), 7),
            (k("c", 0), None, 8), (k("c", 1), None, 9)]                # group c expired entirely
    assert latest(spark_local, rows) == {("a", "t", 1): 6, ("b", "t", 0): 8}


def test_groups_in_different_offsets_partitions(spark_local):
    rows = [(offset_commit_key("g1", "t", 0), offset_commit_value(4), 0, 100),
            (offset_commit_key("g2", "t", 0), offset_commit_value(9), 7, 2),
            (offset_commit_key("g1", "t", 0), offset_commit_value(5), 0, 101)]
    assert latest(spark_local, rows) == {("g1", "t", 0): 5, ("g2", "t", 0): 9}


def test_kafkites_own_records_decode(spark_local):
    """What Kafkite's group coordinator writes (v3 values, v1 with an expire timestamp) decodes too."""
    from kafkite.coordinator import records as R
    import dataclasses
    v = R.OffsetValue(11, 2, "meta", 1_700_000_000_000)
    rows = [(R.offset_key("grp", "orders", 0), R.offset_value(v), 0),
            (R.offset_key("grp", "orders", 1), R.offset_value(dataclasses.replace(v, offset=12,
                                                                               expire_timestamp=1)), 1)]
    assert decoded(spark_local, rows) == [("grp", "orders", 0, 11, 0, 0), ("grp", "orders", 1, 12, 0, 1)]


def test_compute_lag(spark_local):
    commits = spark_local.createDataFrame(
        [("g", "t", 0, 10), ("g", "t", 1, 50), ("g", "gone", 0, 3), ("h", "t", 0, 100)],
        T.StructType([T.StructField("group", T.StringType()), T.StructField("topic", T.StringType()),
                      T.StructField("partition", T.IntegerType()), T.StructField("committed_offset", T.LongType())]))
    ends = spark_local.createDataFrame([("t", 0, 100), ("t", 1, 40)], END_OFFSETS_SCHEMA)
    out = compute_lag(commits, ends)
    assert tuple(out.columns) == LAG_COLUMNS
    assert [tuple(r) for r in out.collect()] == [
        ("g", "gone", 0, 3, None, None),   # topic deleted: end offset unknown
        ("g", "t", 0, 10, 100, 90),
        ("g", "t", 1, 50, 40, 0),          # committed past the end (log truncated): floored at 0
        ("h", "t", 0, 100, 100, 0)]


def test_decoding_runs_in_spark_sql_not_python(spark_local):
    rows = [(offset_commit_key("g", "t", 0), offset_commit_value(1), 0)]
    ends = spark_local.createDataFrame([("t", 0, 5)], END_OFFSETS_SCHEMA)
    df = compute_lag(latest_commits(decode_offsets_df(raw_df(spark_local, rows))), ends)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "EvalPython" not in plan and "PythonUDF" not in plan, plan
    assert [tuple(r) for r in df.collect()] == [("g", "t", 0, 1, 5, 4)]
