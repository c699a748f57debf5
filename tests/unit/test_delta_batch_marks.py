"""The change log's batch marks (decision 0021), read from a commit's actions as Delta writes them."""

from __future__ import annotations

import json

from cdcflow.pipeline.sinks.delta.log import MARK, Mark, mark_of


def _commit(meta: object = None, txn: dict[str, object] | None = None) -> list[dict[str, object]]:
    info: dict[str, object] = {"operation": "WRITE"}
    if meta is not None:
        info["userMetadata"] = meta if isinstance(meta, str) else json.dumps(meta)
    actions: list[dict[str, object]] = [{"commitInfo": info}, {"add": {"path": "part-0.parquet"}}]
    return [*actions, {"txn": txn}] if txn else actions


def test_a_mark_names_the_sink_query_pass_and_batch() -> None:
    mark = {MARK: {"sink": "delta", "query": "q1", "reassembled": True, "batch": 7}}
    assert mark_of(_commit(mark), "delta") == Mark("delta", "q1", True, 7)


def test_another_sinks_mark_and_commits_without_one_are_no_mark() -> None:
    theirs = {MARK: {"sink": "other", "query": "q1", "reassembled": False, "batch": 7}}
    assert mark_of(_commit(theirs), "delta") is None
    assert mark_of(_commit(), "delta") is None  # OPTIMIZE, the table's creation
    assert mark_of(_commit("a user's own note"), "delta") is None


def test_a_malformed_mark_is_no_mark() -> None:
    assert mark_of(_commit('{"cdcflow_batch": {"sink": "delta"}}'), "delta") is None
    assert mark_of(_commit('{"cdcflow_batch": not json'), "delta") is None


def test_the_transaction_ids_of_earlier_versions_read_as_marks() -> None:
    query = "0f9c5a1e-3b7d-4c2a-9e8f-1a2b3c4d5e6f"
    assert mark_of(_commit(txn={"appId": f"cdcflow-delta-{query}", "version": 3}), "delta") == Mark(
        "delta", query, False, 3
    )
    assert mark_of(_commit(txn={"appId": f"cdcflow-delta-{query}-reassembled", "version": 3}), "delta") == Mark(
        "delta", query, True, 3
    )
    assert mark_of(_commit(txn={"appId": f"cdcflow-other-{query}", "version": 3}), "delta") is None
