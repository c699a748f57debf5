"""When the Delta sink's fold thread folds: tables due by age wait while the folds rest in proportion to what
the last round cost (`fold_time_share`); a table with `fold_rows` pending does not wait. A clock the test moves
stands in for time; the folds are functions that take their time on it."""

from __future__ import annotations

import pytest

from cdcflow.pipeline.sinks.delta.folds import FoldScheduler

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def scheduler(clock: Clock, share: float, fold_s: float = 20.0, fold_rows: int = 1000) -> tuple[FoldScheduler,
                                                                                                list[str]]:  # fmt: skip
    folded: list[str] = []

    def fold(path: str) -> int:
        clock.now += fold_s
        folded.append(path)
        return 1

    return FoldScheduler("s", fold, fold_rows, 60.0, 4, time_share=share, clock=clock), folded


def test_after_a_round_tables_due_by_age_wait_three_times_its_length_at_a_quarter_share() -> None:
    clock = Clock()
    folds, folded = scheduler(clock, share=0.25)
    folds.logged({"a": 10, "b": 10})
    clock.now += 61
    folds.round()
    assert sorted(folded) == ["a", "b"]  # one round of two folds, each moving the clock 20 s
    assert folds.rest_s == pytest.approx(40 * 3)

    folds.logged({"a": 5})
    clock.now += 61  # due by age, still resting
    folds.round()
    assert sorted(folded) == ["a", "b"]
    assert folds.status()["a"]["pending_rows"] == 5
    assert not folds.status()["a"]["stale"]  # late only past interval + rest + 30 s

    clock.now = folds.resting_until
    folds.round()
    assert sorted(folded) == ["a", "a", "b"]
    assert folds.rest_s == pytest.approx(20 * 3)


def test_a_table_with_fold_rows_pending_is_folded_while_the_others_rest() -> None:
    clock = Clock()
    folds, folded = scheduler(clock, share=0.25, fold_s=40.0, fold_rows=100)  # rests 120 s after a fold
    folds.logged({"a": 10})
    clock.now += 61
    folds.round()
    folds.logged({"a": 10, "big": 150})
    clock.now += 61
    folds.round()
    assert folded == ["a", "big"]


def test_a_full_share_never_rests() -> None:
    clock = Clock()
    folds, folded = scheduler(clock, share=1.0)
    folds.logged({"a": 10})
    clock.now += 61
    folds.round()
    folds.logged({"a": 10})
    clock.now += 61
    folds.round()
    assert folded == ["a", "a"]
    assert folds.rest_s == 0


def test_a_failed_fold_rests_too_and_its_table_stays_pending() -> None:
    clock = Clock()

    def failing(path: str) -> int:
        clock.now += 30
        raise RuntimeError("boom")

    folds = FoldScheduler("s", failing, 1000, 60.0, 4, time_share=0.5, clock=clock)
    folds.logged({"a": 7})
    clock.now += 61
    folds.round()
    assert folds.rest_s == pytest.approx(30)
    status = folds.status()["a"]
    assert status["pending_rows"] == 7 and status["fold_error"] == "RuntimeError: boom"


def test_a_table_is_stale_only_past_its_interval_the_rest_and_half_a_minute() -> None:
    clock = Clock()
    folds, _ = scheduler(clock, share=0.25)
    folds.logged({"a": 1})
    clock.now += 61
    folds.round()  # 20 s of folding: a rest of 60 s
    folds.logged({"a": 1})
    clock.now += 60 + 60 + 29
    assert not folds.status()["a"]["stale"]
    clock.now += 2
    assert folds.status()["a"]["stale"]


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 2), (8, 4), (64, 4)])
def test_beside_the_batches_folds_use_half_the_cores(cores: int, threads: int) -> None:
    folds, _ = scheduler(Clock(), share=0.25)
    folds.sized_to(cores)
    assert folds.background_threads == threads
    assert folds.threads == 4  # fold_all, with nothing else to run, uses them all
