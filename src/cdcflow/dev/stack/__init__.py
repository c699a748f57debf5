"""Installs and runs the real local services (Kafka, HBase, MariaDB) used by dev, tests and the demo.

`Stack(home)` is the entry point: `up()`, `down()`, `status()`. Each service lives in its own
module; versions are pinned in `versions.py` and nowhere else.
"""

from cdcflow.config.model import COMPONENTS
from cdcflow.dev.stack.manager import Stack

__all__ = ["COMPONENTS", "Stack"]
