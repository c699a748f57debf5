"""`python -m cdcflow.dev.registry --port P --data DIR`: serve the registry (the stack's `registry` service)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import uvicorn

from cdcflow.dev.registry.app import create_app


def main() -> None:
    parser = argparse.ArgumentParser(description="A schema registry with Confluent's REST API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", type=Path, required=True, help="folder of the log file (schemas.log)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(args.data / "schemas.log"), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
