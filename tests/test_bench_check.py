"""The speed benchmarks' ``--check`` logic (issue 21) on made-up rates: nothing is timed here."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.env_speed import Row, paired, report, rows_from


def test_each_ratio_is_to_the_reference_timed_just_before() -> None:
    """The reference speeds up between pairs (the drift a shared machine shows); each timing of a
    row is divided by the reference's timing just before it, and the medians are reported."""
    ref_rates = iter([100.0, 100.0, 100.0, 400.0, 400.0, 400.0])  # two rounds of three timings
    a_rates, b_rates = iter([10.0, 40.0]), iter([30.0, 20.0])
    runs = {"ref": lambda: next(ref_rates), "a": lambda: next(a_rates), "b": lambda: next(b_rates)}
    samples = paired(runs, "ref", repeat=2)
    assert samples["a"]["ratio"] == [pytest.approx(0.1), pytest.approx(0.1)]
    assert samples["b"]["ratio"] == [pytest.approx(0.3), pytest.approx(0.05)]
    by = {r.name: r for r in rows_from(samples, {"a": 0.1})}
    assert by["ref"].ratio == 1.0 and by["ref"].rate == 250.0 and by["ref"].target is None
    assert by["a"].ratio == pytest.approx(0.1) and not by["a"].missed
    assert by["b"].ratio == pytest.approx(0.175) and by["b"].rate == 25.0


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


@pytest.mark.parametrize(
    ("script", "flag"),
    [("env_speed.py", "--steps=0"), ("env_speed.py", "--processes=0"), ("train_speed.py", "--n-envs=0")],
)
def test_a_bad_size_is_one_usage_line_on_exit_2(script: str, flag: str) -> None:
    root = Path(__file__).resolve().parent.parent
    p = subprocess.run(
        [sys.executable, str(root / "benchmarks" / script), flag], capture_output=True, text=True, timeout=120
    )
    name = flag.split("=")[0]
    assert p.returncode == 2 and f"error: {name} must be at least 1" in p.stderr and "Traceback" not in p.stderr
