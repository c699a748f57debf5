"""The pipeline as a spark-submit application.

    spark-submit [--master URL] --jars <cdcflow's connector jars> .../cdcflow/cli/spark_app.py --config cdcflow.yaml

Same as `cdcflow pipeline run`, except that the Spark master (and every other Spark setting
given to spark-submit) comes from spark-submit instead of `pipeline.master`.
`cdcflow pipeline submit` prints or runs this command with the jars filled in.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdcflow-pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=None, help="cdcflow config file (default: the bundled one)")
    parser.add_argument("--available-now", action="store_true", help="apply what is in Kafka now, then stop")
    parser.add_argument("--metrics-port", type=int, default=None, help="serve per-sink Prometheus metrics here")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    os.environ["CDCFLOW__PIPELINE__MASTER"] = "null"  # let spark-submit's --master rule
    from cdcflow import logs
    from cdcflow.cli import wiring
    from cdcflow.errors import CdcflowError

    logs.configure(args.log_level, os.environ.get("CDCFLOW_LOG_FORMAT", "text"))
    try:
        return wiring.run_pipeline(wiring.load(args.config), args.available_now, args.metrics_port)
    except CdcflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
