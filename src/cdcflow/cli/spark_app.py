"""The pipeline as a spark-submit application.

    spark-submit [--master URL] --jars <cdcflow's connector jars> .../cdcflow/cli/spark_app.py --config cdcflow.yaml

Same as `cdcflow pipeline run`, except that the Spark master (and every other Spark setting
given to spark-submit) comes from spark-submit instead of `pipeline.master`.
`cdcflow pipeline submit` prints or runs this command with the jars filled in.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ["CDCFLOW__PIPELINE__MASTER"] = "null"  # let spark-submit's --master rule
    from cdcflow.cli.main import entrypoint

    sys.argv = ["cdcflow", "pipeline", "run", *sys.argv[1:]]
    entrypoint()


if __name__ == "__main__":
    main()
