"""benchmarks/reproduce.py: the verdict logic on hand-made figures, and one tiny run's table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from PIL import Image

from benchmarks import reproduce as rp

KEYS = {
    "paper",
    "headline",
    "paper_value",
    "ours",
    "ci95",
    "magnitude_ratio",
    "direction_ok",
    "magnitude_ok",
    "reason",
}


# ------------------------------------------------------------------------------------- verdicts
def test_times_headline_compares_factor_minus_one():
    v = rp.verdict("times", 1.50, 1.46)  # 0.46 of 0.50
    assert v.magnitude_ratio == pytest.approx(0.92)
    assert v.direction_ok and v.magnitude_ok
    v = rp.verdict("times", 1.20, 1.03)  # 0.03 of 0.20: right way, too small
    assert v.magnitude_ratio == pytest.approx(0.15)
    assert v.direction_ok and not v.magnitude_ok
    v = rp.verdict("times", 1.20, 0.95)  # the other way
    assert v.magnitude_ratio == pytest.approx(-0.25)
    assert not v.direction_ok and not v.magnitude_ok


def test_percent_and_points_headlines_keep_their_sign():
    v = rp.verdict("percent", -96.6, -80.0)
    assert v.magnitude_ratio == pytest.approx(80.0 / 96.6)
    assert v.direction_ok and v.magnitude_ok
    v = rp.verdict("percent", -34.0, 10.0)
    assert not v.direction_ok and not v.magnitude_ok
    v = rp.verdict("points", 17.0, 13.6)  # exactly 80%
    assert v.magnitude_ratio == pytest.approx(0.8) and v.magnitude_ok
    v = rp.verdict("points", 17.0, 13.5)
    assert v.direction_ok and not v.magnitude_ok


def test_zero_effect_has_no_direction_and_overshoot_still_passes():
    assert not rp.verdict("times", 1.5, 1.0).direction_ok
    v = rp.verdict("times", 1.53, 242.0)
    assert v.direction_ok and v.magnitude_ok and v.magnitude_ratio is not None and v.magnitude_ratio > rp.OVERSHOOT


def test_equal_and_direction_only_headlines():
    assert rp.verdict("equal", 1.0, 1.0) == rp.Verdict(None, True, True)
    assert rp.verdict("equal", 1.0, 1.0 + rp.EQUAL_TOL / 2) == rp.Verdict(None, True, True)
    assert rp.verdict("equal", 1.0, 1.19) == rp.Verdict(None, False, False)
    assert rp.verdict("percent", None, 50.0, sign=1) == rp.Verdict(None, True, True)
    assert rp.verdict("percent", None, -50.0, sign=1) == rp.Verdict(None, False, False)
    assert rp.verdict("percent", 10.0, None) == rp.Verdict(None, False, False)
    assert rp.verdict("percent", 10.0, math.nan) == rp.Verdict(None, False, False)
    with pytest.raises(ValueError):
        rp.verdict("percent", None, 5.0)
    with pytest.raises(ValueError):
        rp.verdict("ratio", 1.0, 1.0)


def test_reclaim_stat_is_the_ratio_of_sums():
    checks = [rp.ReclaimCheck(3, 3, 5, 2, 0, 4), rp.ReclaimCheck(5, 4, 6, 3, 1, 8), rp.ReclaimCheck(0, 0, 0, 0, 2, 0)]
    st = rp.reclaim_stat(checks)
    assert st.mean == pytest.approx(8 / 7) and st.n == 2
    assert rp.reclaim_stat([rp.ReclaimCheck(0, 0, 4, 0, 0, 2)]).mean == 1.0
    assert rp.reclaim_stat([]).mean is None


def test_every_setting_names_its_operating_point_and_every_run_its_setting():
    assert {r.setting for r in rp.RUNS} == set(rp.SETTINGS)
    for s in rp.SETTINGS.values():
        assert len(s.doc) > 80, s.name
    labels = [r.label for r in rp.RUNS]
    assert len(set(labels)) == len(labels)


# ------------------------------------------------------------------------------------ a tiny run
@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reproduce")
    code = rp.main(
        [
            "--seeds",
            "0",
            "--jobs",
            "30",
            "--workers",
            "1",
            "--json",
            str(out / "r.json"),
            "--markdown",
            str(out / "r.md"),
            "--figure",
            str(out / "r.png"),
        ]
    )
    assert code == 0
    return out


def test_json_rows_have_the_keys_and_consistent_verdicts(tiny: Path):
    doc = json.loads((tiny / "r.json").read_text())
    assert [(r["paper"], r["headline"]) for r in doc] == [(h.paper, h.headline) for h in rp.HEADLINES]
    for row, h in zip(doc, rp.HEADLINES, strict=True):
        assert set(row) == KEYS
        assert row["paper_value"] == h.paper_value
        v = rp.verdict(h.kind, h.paper_value, row["ours"], h.sign)
        assert (v.direction_ok, v.magnitude_ok) == (row["direction_ok"], row["magnitude_ok"])
        if v.magnitude_ratio is None:
            assert row["magnitude_ratio"] is None
        else:
            assert row["magnitude_ratio"] == pytest.approx(v.magnitude_ratio)
        assert row["ci95"] is None  # one seed: no interval
        failed = not (row["direction_ok"] and row["magnitude_ok"])
        over = row["magnitude_ratio"] is not None and row["magnitude_ratio"] > rp.OVERSHOOT
        assert bool(row["reason"]) == (failed or over), row
        assert "\n" not in row["reason"]


def test_markdown_table_has_one_row_per_headline(tiny: Path):
    lines = (tiny / "r.md").read_text().splitlines()
    table = [x for x in lines if x.startswith("|")]
    assert table[0].startswith("| paper | headline | paper | ours |")
    assert len(table) == 2 + len(rp.HEADLINES)
    assert all(x.count("|") == table[0].count("|") for x in table)
    assert "Seeds 0" in lines[0]


def test_figure_is_a_png(tiny: Path):
    with Image.open(tiny / "r.png") as im:
        assert im.format == "PNG" and im.size[1] > 200


def test_bad_seeds_is_a_user_error_that_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "r.json"
    assert rp.main(["--seeds", "x", "--json", str(out)]) == 2
    assert not out.exists()
    assert "--seeds" in capsys.readouterr().out


# ------------------------------------------------------------------ themis as the repository's
class _Stub:
    """The few view reads ``Themis.shares`` makes."""

    def __init__(self, now: float, jobs: dict[int, tuple[float, float]]) -> None:
        from types import SimpleNamespace

        self.now = now
        self._jobs = {j: SimpleNamespace(submit_time=sub, num_gpus=1) for j, (sub, _) in jobs.items()}
        self._states = {j: SimpleNamespace(remaining_work=rem) for j, (_, rem) in jobs.items()}

    def job(self, j: int):
        return self._jobs[j]

    def state(self, j: int):
        return self._states[j]


def test_themis_shares_equalise_the_predicted_fairness():
    from heuristics.fairness import Themis, ThemisConfig

    themis = Themis(ThemisConfig(allocation="shares"))
    # one GPU, two 1-GPU jobs just arrived (100 s and 300 s left): isolated share 1/2, so each
    # isolated time is twice its work, and equal shares of 1/2 give both rho = 1
    x = themis.shares(_Stub(0.0, {0: (0.0, 100.0), 1: (0.0, 300.0)}), [0, 1], gpus=1)  # type: ignore[arg-type]
    assert x == {0: pytest.approx(0.5), 1: pytest.approx(0.5)}
    # job 0 has waited 100 s: it gets the larger share, the GPU stays full, and the two predicted
    # ratios (t + rem / x) / (rem / iso) are equal
    x = themis.shares(_Stub(100.0, {0: (0.0, 100.0), 1: (100.0, 300.0)}), [0, 1], gpus=1)  # type: ignore[arg-type]
    assert x[0] > x[1] and x[0] + x[1] == pytest.approx(1.0, abs=1e-9)
    rho0, rho1 = (100 + 100 / x[0]) / 200, (0 + 300 / x[1]) / 600
    assert rho0 == pytest.approx(rho1, rel=1e-9)


# ------------------------------------------------------------------- Table 6's interruptions in Ideal
def test_interruptions_count_scale_ins_that_make_room_from_the_event_log():
    log = [
        (0.0, "arrive", 0, ""),
        (0.0, "start", 0, "s0x2 +s1x2 s2x2"),  # job 0: 4 flexible GPUs, on servers 1 (training) and 2
        (0.0, "start", 1, "s3x1 +s4x1"),
        (5.0, "loan", 7, ""),
        (10.0, "scale", 0, "s0x2 +s2x2"),  # job 0 gives 2 GPUs of server 1 ...
        (10.0, "start", 2, "s1x2"),  # ... to job 2: a scale-in to make room
        (20.0, "scale", 1, "s3x1"),  # job 1 scales in and nobody gains: not to make room
        (30.0, "scale", 0, "s0x2 +s5x2"),  # job 0 moves its 2 flexible GPUs
        (40.0, "scale", 0, "s0x2"),  # job 0 scales in, to job 1 scaling out
        (40.0, "scale", 1, "s3x1 +s5x2"),
        (50.0, "preempt", 2, "lost 0"),
        (60.0, "scale", 1, "s3x1 +s5x1"),  # job 1 scales in and finishes the same moment
        (60.0, "finish", 1, ""),
        (60.0, "start", 3, "s5x1"),
    ]
    got = rp.interruptions(log, training=frozenset({0, 1, 3}))
    assert got == rp.Interruptions(
        preemptions=1, scale_ins=2, scale_ins_alone=1, moves=1, jobs=2, taken_training=2, taken_loaned=2
    )
    assert got.total == 3
    assert got.metrics()["scale_in_training_share"] == pytest.approx(0.5)


def test_the_interruption_check_replays_the_ideal_runs_unchanged():
    from agents import evaluation as ev
    from envs.sim import scenarios
    from envs.sim.metrics import TIMING_KEYS, summarize
    from heuristics.registry import make

    checked = rp.interruption_check(0, jobs=80)
    assert set(checked) == {r.label for r in rp.RUNS if r.setting == "ideal"}
    tasks = {t: r for t, r in rp.plan([0], jobs=80).items() if r.setting == "ideal"}
    assert {r.label for r in tasks.values()} == set(checked)
    for task, run in tasks.items():
        swept = ev.run_task(task).metrics  # the sweep's run, without the event log
        scenario = scenarios.get(task.scenario, dict(task.scenario_sets))
        replay = scenarios.simulate(scenario, make(run.policy), 0, log=True)
        logged = summarize(replay)
        assert {k: v for k, v in logged.items() if k not in TIMING_KEYS} == {
            k: v for k, v in swept.items() if k not in TIMING_KEYS
        }
        assert checked[run.label]["interruptions"] >= swept["preemptions"]


def test_the_backfilling_baseline_keeps_fifo_order_on_the_baselines_jobs():
    from agents import evaluation as ev

    policy = rp.backfill_fifo()
    assert not policy.borrows and not policy.ordering.blocking  # type: ignore[attr-defined]
    task = next(t for t, r in rp.plan([0], jobs=60).items() if r.label == "baseline")
    base = ev.run_task(task).metrics
    mine = rp.backfill_check(0, 60, task.borrowing)
    assert (mine["jobs_total"], mine["offered_load"]) == (base["jobs_total"], base["offered_load"])
    assert mine["jobs_finished"] == mine["jobs_total"]
