"""The speed benchmarks' ``--check`` logic (issue 21) on made-up rates: nothing is timed here."""

from __future__ import annotations

import math

import pytest

from benchmarks.env_speed import Row, report, rows_of


def test_ratios_are_to_the_named_reference() -> None:
    rows = rows_of({"ref": 200.0, "a": 10.0, "b": 50.0}, {"a": "ref", "b": "a"}, {"a": 0.05})
    by = {r.name: r for r in rows}
    assert by["ref"].ratio == 1.0 and by["ref"].target is None
    assert by["a"].ratio == pytest.approx(0.05) and by["a"].target == 0.05
    assert by["b"].ratio == pytest.approx(5.0) and by["b"].target is None


@pytest.mark.parametrize(
    ("ratio", "target", "missed"),
    [(0.049, 0.05, True), (0.05, 0.05, False), (0.2, 0.05, False), (0.0, None, False), (math.nan, 0.05, True)],
)
def test_a_row_misses_only_below_its_target(ratio: float, target: float | None, missed: bool) -> None:
    assert Row("x", 1.0, ratio, target).missed is missed


def test_check_fails_on_a_ratio_below_target(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [Row("toy", 1000.0, 1.0), Row("ordering", 40.0, 0.04, 0.05), Row("dual", 60.0, 0.06, 0.05)]
    assert report(rows, "steps/s", check=True) == 1
    out = capsys.readouterr().out
    assert "ordering (0.040 < 0.05)" in out and "dual (" not in out.split("check failed")[1]
    assert report(rows, "steps/s", check=False) == 0  # without --check it only prints


def test_check_passes_when_every_ratio_holds(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [Row("toy", 1000.0, 1.0), Row("ordering", 60.0, 0.06, 0.05)]
    assert report(rows, "steps/s", check=True) == 0
    assert "check failed" not in capsys.readouterr().out
