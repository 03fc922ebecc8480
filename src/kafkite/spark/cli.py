"""`kafkite spark lag` and `kafkite spark export`."""
from __future__ import annotations

import argparse


def add_subparser(sub) -> None:
    sp = sub.add_parser("spark", help="Spark pipelines over a Kafka-compatible cluster")
    ss = sp.add_subparsers(dest="spark_cmd", required=True)
    lag = ss.add_parser("lag", help="consumer lag per group and partition from __consumer_offsets")
    lag.add_argument("--bootstrap-servers", required=True)
    lag.add_argument("--output", help="write Parquet here instead of printing a table")
    lag.set_defaults(func=_lag)
    ex = ss.add_parser("export", help="export a topic to Parquet")
    ex.add_argument("--bootstrap-servers", required=True)
    ex.add_argument("--topic", required=True)
    ex.add_argument("--output", required=True)
    ex.add_argument("--starting-timestamp", type=int)
    ex.add_argument("--ending-timestamp", type=int)
    ex.set_defaults(func=_export)


def _lag(args: argparse.Namespace) -> int:
    from . import session
    from .lag import run_lag
    spark = session(args.bootstrap_servers, app_name="kafkite-lag")
    try:
        df = run_lag(spark, args.bootstrap_servers, args.output)
        if not args.output:
            df.show(1000, truncate=False)
    finally:
        spark.stop()
    return 0


def _export(args: argparse.Namespace) -> int:
    from . import session
    from .export import export
    spark = session(args.bootstrap_servers, app_name="kafkite-export")
    try:
        n = export(spark, args.bootstrap_servers, args.topic, args.output,
                   starting_timestamp=args.starting_timestamp, ending_timestamp=args.ending_timestamp)
        print(f"exported {n} records to {args.output}")
    finally:
        spark.stop()
    return 0
