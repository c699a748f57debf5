"""A fold record read while the fold thread replaces it (real Spark, the local file system): `write_text` renames
the file and then its checksum file, so a read in between finds new text under the old checksum. The read is
done again until the checksum matches; the text was whole all along (seen once in a fresh-clone run:
ChecksumException from test_a_restart_with_nothing_new_folds_and_names_what_a_killed_run_left)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta import records
from cdcflow.pipeline.sinks.delta.records import _read_text_once, read_text, write_text


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-fold-records")


def test_a_read_between_the_renames_of_file_and_checksum_is_done_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.cdcflow.json"
    crc = tmp_path / ".t.cdcflow.json.crc"
    write_text(spark, str(path), '{"folded_version": 1}')
    stale = crc.read_bytes()
    write_text(spark, str(path), '{"folded_version": 22}')
    crc.write_bytes(stale)  # the moment between the two renames: new text, old checksum
    with pytest.raises(Exception, match="ChecksumException"):  # the failure the retry is for
        _read_text_once(spark, str(path))
    waits: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(records.time, "sleep", lambda s: (waits.append(s), real_sleep(s)))
    fixed = threading.Timer(0.3, lambda: write_text(spark, str(path), '{"folded_version": 22}'))
    fixed.start()  # the second rename lands
    assert read_text(spark, str(path)) == '{"folded_version": 22}'
    assert waits, "the read never met the stale checksum: the retry path did not run"
    fixed.join()
    crc.write_bytes(stale)  # a checksum that never matches again: still an error, after the retries
    with pytest.raises(Exception, match="ChecksumException"):
        read_text(spark, str(path))
