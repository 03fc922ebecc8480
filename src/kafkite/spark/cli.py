"""`kafkite spark lag` and `kafkite spark export`: the Spark pipelines from the command line.

kafkite.cli wires this in with `add_subparser(subparsers)`. Spark is imported only when a
sub-command runs, so `kafkite --help` works without pyspark.
"""
from __future__ import annotations

import argparse
import contextlib
import sys


def add_subparser(sub) -> argparse.ArgumentParser:
    sp = sub.add_parser("spark", help="Spark pipelines over a Kafka-compatible cluster (needs pyspark and Java)",
                        description="Spark jobs with Spark's Kafka connector. The connector jars come from "
                                    "KAFKITE_SPARK_JARS (a directory of jars) or else from Maven.")
    ss = sp.add_subparsers(dest="spark_cmd", required=True)

    lag = ss.add_parser("lag", help="consumer lag per group and partition from __consumer_offsets")
    lag.add_argument("--bootstrap-servers", required=True)
    lag.add_argument("--output", help="write Parquet here instead of printing a table")
    lag.set_defaults(func=_lag)

    ex = ss.add_parser("export", help="export a topic to Parquet (key, value, headers, partition, offset, timestamp)")
    ex.add_argument("--bootstrap-servers", required=True)
    ex.add_argument("--topic", required=True)
    ex.add_argument("--output", required=True)
    ex.add_argument("--starting-timestamp", type=int, metavar="MS",
                    help="first record: the earliest with timestamp >= MS (default: earliest offset)")
    ex.add_argument("--ending-timestamp", type=int, metavar="MS",
                    help="stop before the first record with timestamp >= MS (default: latest offset)")
    ex.set_defaults(func=_export)

    for p in (lag, ex):
        p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    return sp


@contextlib.contextmanager
def _spark(args: argparse.Namespace, app_name: str):
    """A session for one command; a session that was already running (in-process callers, tests)
    is reused and left running."""
    from pyspark.sql import SparkSession

    from . import session
    running = SparkSession.getActiveSession()
    spark = running or session(args.bootstrap_servers, app_name=app_name, master=args.master)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()


def format_table(rows: list[dict], columns: tuple[str, ...]) -> str:
    """A plain aligned text table, like `kafka-consumer-groups --describe` prints."""
    cells = [[c.upper().replace("_", "-") for c in columns]]
    cells += [["-" if r[c] is None else str(r[c]) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells)


def _lag(args: argparse.Namespace) -> int:
    from .lag import LAG_COLUMNS, run_lag
    with _spark(args, "kafkite-lag") as spark:
        df = run_lag(spark, args.bootstrap_servers, args.output)
        if args.output:
            print(f"wrote lag for {spark.read.parquet(args.output).count()} partitions to {args.output}")
        else:
            rows = [r.asDict() for r in df.collect()]
            print(format_table(rows, LAG_COLUMNS) if rows else "no committed offsets")
    return 0


def _export(args: argparse.Namespace) -> int:
    from .export import export
    if (args.starting_timestamp is not None and args.ending_timestamp is not None
            and args.ending_timestamp <= args.starting_timestamp):
        print("--ending-timestamp must be after --starting-timestamp", file=sys.stderr)
        return 2
    with _spark(args, "kafkite-export") as spark:
        n = export(spark, args.bootstrap_servers, args.topic, args.output,
                   starting_timestamp=args.starting_timestamp, ending_timestamp=args.ending_timestamp)
        print(f"exported {n} records to {args.output}")
    return 0
