"""A fold record read while the fold thread replaces it (real Spark, the local file system). Hadoop's rename with
OVERWRITE there deletes the file, then renames, then renames its checksum file: a read in between found new text
under the old checksum (seen once in a fresh-clone run: ChecksumException from
test_a_restart_with_nothing_new_folds_and_names_what_a_killed_run_left), or no record at all (seen in the next
one, by the test of that retry). `write_text` now replaces a local record with one POSIX rename; a stale
checksum is still read again."""

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


def _hadoop_write(spark: SparkSession, path: Path, text: str) -> None:
    """Text written through Hadoop's local file system, which writes a checksum file beside it."""
    sc = spark.sparkContext
    assert sc._jvm is not None and sc._jsc is not None
    jpath = sc._jvm.org.apache.hadoop.fs.Path(str(path))
    out = jpath.getFileSystem(sc._jsc.hadoopConfiguration()).create(jpath, True)
    out.write(bytearray(text.encode()))
    out.close()


def test_a_reader_never_finds_the_record_missing_or_half_written_while_it_is_replaced(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Seen in a fresh-clone run: Hadoop's rename with OVERWRITE on the local file system deletes, then renames,
    so a read in between found no record (read as "never folded")."""
    path = str(tmp_path / "db" / "t.cdcflow.json")  # a table's first record comes before its folder
    texts = [f'{{"folded_version": {i}}}' for i in range(150)]
    write_text(spark, path, texts[0])
    done = threading.Event()

    def replace_them() -> None:
        for text in texts[1:]:
            write_text(spark, path, text)
        done.set()

    writer = threading.Thread(target=replace_them, daemon=True)
    writer.start()
    reads = []
    while not done.is_set():
        reads.append(_read_text_once(spark, path))  # one read each: no retry hides anything
    writer.join()
    assert len(reads) > 20 and set(reads) <= set(texts), [r for r in reads if r not in texts][:3]
    assert read_text(spark, path) == texts[-1]
    assert not list((tmp_path / "db").glob("*.tmp")) and not list((tmp_path / "db").glob(".*.tmp"))


def test_a_read_of_new_text_under_an_old_checksum_is_done_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record Hadoop wrote (with its checksum file) whose text changed under it: the read is done again until
    the checksum matches or is gone (a record written by an older cdcflow, replaced by this one)."""
    path = tmp_path / "t.cdcflow.json"
    crc = tmp_path / ".t.cdcflow.json.crc"
    _hadoop_write(spark, path, '{"folded_version": 1}')
    assert crc.exists()
    path.write_text('{"folded_version": 22}')  # new text, old checksum
    with pytest.raises(Exception, match="ChecksumException"):  # the failure the retry is for
        _read_text_once(spark, str(path))
    waits: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(records.time, "sleep", lambda s: (waits.append(s), real_sleep(s)))
    fixed = threading.Timer(0.3, lambda: write_text(spark, str(path), '{"folded_version": 22}'))
    fixed.start()  # replaced by this cdcflow: the stale checksum goes
    assert read_text(spark, str(path)) == '{"folded_version": 22}'
    assert waits, "the read never met the stale checksum: the retry path did not run"
    fixed.join()
    assert not crc.exists()
    _hadoop_write(spark, path, '{"folded_version": 1}')
    path.write_text('{"folded_version": 23}')  # a checksum that never matches: still an error, after the retries
    with pytest.raises(Exception, match="ChecksumException"):
        read_text(spark, str(path))
