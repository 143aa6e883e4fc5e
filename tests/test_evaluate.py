"""evaluate.py: sweeps of heuristics and trained agents, local and Ray backends, resuming, results
files, aggregates and ratios, plots, TensorBoard, and user errors (exit 2, nothing written)."""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import evaluate
from agents import evaluation as ev
from agents import plots
from agents.dual import TrainConfig
from envs.sim.metrics import METRICS, TIMING_KEYS

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "workload.synthetic.num_jobs=40"]


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny train.py run (about a minute)."""
    out = tmp_path_factory.mktemp("train")
    cmd = [sys.executable, "train.py", "--total-steps", "600", "--rounds", "1"]
    for s in ("demo_episodes=1", "bc_epochs=1", "eval_seeds=100000", "n_steps=32", "batch_size=64"):
        cmd += ["--set", s]
    cmd += [*SMALL, "--set", "baselines=fifo", "--out", str(out / "runs"), "--demos", str(out / "demos")]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=600)
    (run,) = (out / "runs").iterdir()
    return run


def sweep_args(run: Path, out: Path, *extra: str) -> list[str]:
    return ["--policies", f"fifo,aryl,ppo:{run}", "--seeds", "0-1", *SMALL, "--out", str(out), *extra]


@pytest.fixture(scope="module")
def local(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent next to two heuristics, 2 seeds, local process pool."""
    out = tmp_path_factory.mktemp("local")
    assert evaluate.main(sweep_args(run_dir, out, "--workers", "2")) == 0
    return out


def comparable(doc: dict) -> dict:
    """results.json without meta and the wall-clock keys."""
    doc = json.loads(json.dumps(doc))
    doc.pop("meta")
    for section in ("runs", "aggregates", "ratios"):
        for row in doc[section]:
            for k in TIMING_KEYS:
                row["metrics"].pop(k)
    return doc


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def csv_without_timings(path: Path) -> list[list[str]]:
    import csv

    rows = [r for r in csv.reader(path.open(encoding="utf-8")) if not set(r) & set(TIMING_KEYS) or r[0] == "policy"]
    drop = {i for i, h in enumerate(rows[0]) if h in TIMING_KEYS}  # results.csv: columns; aggregates.csv: rows
    return [[c for i, c in enumerate(r) if i not in drop] for r in rows]


# ---------------------------------------------------------------------------------------------- arguments
def test_grid_is_the_cartesian_product_and_a_semicolon_stays_inside_one_value():
    grid = ev.parse_grid(["a=1,2", "b=x", "c=p;q,r"])
    assert grid == [
        {"a": "1", "b": "x", "c": "p,q"},
        {"a": "1", "b": "x", "c": "r"},
        {"a": "2", "b": "x", "c": "p,q"},
        {"a": "2", "b": "x", "c": "r"},
    ]
    assert ev.parse_grid([]) == [{}]
    assert ev.parse_seeds("0-2,7,1") == [0, 1, 2, 7]


# ---------------------------------------------------------------------------------------------- aggregation
def _result(policy: str, seed: int, **metrics: float | None) -> ev.TaskResult:
    full = dict.fromkeys(METRICS, 1.0) | {"jobs_unfinished": 0} | metrics
    return ev.TaskResult(ev.Task(policy, "default", seed), full)


def test_mean_std_and_student_t_interval_over_seeds_by_hand():
    s = ev.stat([1.0, 2.0, 3.0])
    # mean 2, sample std 1, t(0.975, 2) = 4.302652729749464
    assert (s.mean, s.std, s.n) == (2.0, 1.0, 3)
    assert s.ci95 == pytest.approx(4.302652729749464 / math.sqrt(3), rel=1e-9)
    one = ev.stat([5.0, None])
    assert (one.mean, one.std, one.ci95, one.n) == (5.0, None, None, 1)
    assert ev.stat([None]) == ev.Stat(None, None, None, 0)


def test_ratio_is_the_policy_mean_over_the_reference_mean():
    rs = [
        _result("fifo", 0, avg_jct_s=100.0, utilization=0.5),
        _result("fifo", 1, avg_jct_s=300.0, utilization=0.5),
        _result("sjf", 0, avg_jct_s=50.0, utilization=0.6),
        _result("sjf", 1, avg_jct_s=150.0, utilization=0.4, worst_ftf=None),
    ]
    doc = ev.results_document(rs, ["x"], reference="fifo")
    by = {r["policy"]: r["metrics"] for r in doc["ratios"]}
    assert by["sjf"]["avg_jct_s"] == 100.0 / 200.0
    assert by["sjf"]["utilization"] == pytest.approx(1.0)
    assert by["sjf"]["worst_ftf"] == 1.0  # the seed where it is null is left out
    assert by["fifo"]["avg_jct_s"] == 1.0
    agg = {a["policy"]: a for a in doc["aggregates"]}
    assert agg["sjf"]["metrics"]["avg_jct_s"]["mean"] == 100.0
    assert agg["sjf"]["seeds"] == [0, 1]
    assert set(doc) >= {"runs", "aggregates", "ratios", "metric_units", "meta"}


# ---------------------------------------------------------------------------------------------- sweeps
def test_an_agent_is_evaluated_next_to_heuristics(local: Path, run_dir: Path):
    doc = results(local)
    label = f"ppo:{run_dir.name}"
    assert [(r["policy"], r["seed"]) for r in doc["runs"]] == [(p, s) for p in ("fifo", "aryl", label) for s in (0, 1)]
    agent_rows = [r for r in doc["runs"] if r["policy"] == label]
    assert all(
        r["notes"] == [] and r["agent"]["checkpoints"] == ["ordering_best.zip", "placement_best.zip"]
        for r in agent_rows
    )
    assert {r["policy"] for r in doc["ratios"]} == {"fifo", "aryl", label}
    # the agent's figures are those of agents.partners.run_episode (the RL envs' own episode loop)
    from sb3_contrib import MaskablePPO

    from agents.partners import run_episode
    from agents.rundir import load_config
    from envs.core import CoreConfig

    cfg = load_config(run_dir)
    core = CoreConfig.from_kwargs(**(cfg.core_kwargs() | {"overrides": {"workload.synthetic.num_jobs": "40"}}))
    models = [
        MaskablePPO.load(run_dir / "checkpoints" / f"{a}_best.zip", device="cpu") for a in ("ordering", "placement")
    ]
    direct = run_episode(core, 1, models[0], models[1], cfg.max_jobs)
    assert {k: v for k, v in direct.items() if k not in TIMING_KEYS} == {
        k: v for k, v in agent_rows[1]["metrics"].items() if k not in TIMING_KEYS
    }


def test_ray_backend_gives_the_local_results(local: Path, run_dir: Path, tmp_path: Path):
    out = tmp_path / "ray"
    assert evaluate.main(sweep_args(run_dir, out, "--backend", "ray", "--workers", "1")) == 0
    assert comparable(results(out)) == comparable(results(local))


def test_same_command_twice_gives_identical_results(local: Path, run_dir: Path, tmp_path: Path):
    out = tmp_path / "again"
    assert evaluate.main(sweep_args(run_dir, out, "--workers", "1")) == 0  # inline this time
    assert comparable(results(out)) == comparable(results(local))
    for name in ("results.csv", "aggregates.csv"):
        assert csv_without_timings(out / name) == csv_without_timings(local / name)


def test_a_sweep_missing_some_task_files_resumes_to_the_complete_set(local: Path, run_dir: Path, tmp_path: Path):
    out = tmp_path / "resume"
    shutil.copytree(local, out)
    files = sorted((out / "tasks").iterdir())
    gone, kept = files[:2], files[2:]
    for f in gone:
        f.unlink()
    stale = kept.pop()  # a file from before a metric was added is run again
    doc = json.loads(stale.read_text(encoding="utf-8"))
    doc["task"]["metrics"].pop("fee")
    stale.write_text(json.dumps(doc), encoding="utf-8")
    (out / "results.json").unlink()
    stamps = {f: f.stat().st_mtime_ns for f in kept}
    assert evaluate.main(sweep_args(run_dir, out, "--workers", "1")) == 0
    assert sorted((out / "tasks").iterdir()) == files
    assert {f: f.stat().st_mtime_ns for f in kept} == stamps  # reused, not rerun
    assert "fee" in json.loads(stale.read_text(encoding="utf-8"))["task"]["metrics"]
    assert comparable(results(out)) == comparable(results(local))
    # a later command over fewer seeds reports exactly its own tasks
    assert evaluate.main(["--policies", "fifo", "--seeds", "1", *SMALL, "--out", str(out)]) == 0
    assert [(r["policy"], r["seed"]) for r in results(out)["runs"]] == [("fifo", 1)]


def test_a_killed_sweep_resumes_to_the_complete_set(tmp_path: Path):
    out = tmp_path / "killed"
    args = ["--policies", "fifo,sjf", "--seeds", "0-5", "--workers", "1", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "evaluate.py", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while proc.poll() is None and len(list((out / "tasks").glob("*.json"))) < 2:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert not (out / "results.json").exists(), "the sweep finished before it could be killed"
    # what a kill in the middle of writing a task file leaves (atomic_open's temporary file)
    (out / "tasks" / ".fifo__default__3__0.json.k1lled.tmp").write_text('{"task": {"pol')
    assert evaluate.main(args) == 0
    runs = results(out)["runs"]
    assert [(r["policy"], r["seed"]) for r in runs] == [(p, s) for p in ("fifo", "sjf") for s in range(6)]
    assert len(list((out / "tasks").glob("*.json"))) == 12
    assert not list((out / "tasks").glob(".*"))  # no temporary file left behind


def test_placement_agent_for_another_cluster_size_is_replaced_and_noted(run_dir: Path):
    (task,) = ev.plan(
        [f"ppo:{run_dir}"], ["default"], [0], [{"workload.synthetic.num_jobs": "40", "cluster.training_servers": "4"}]
    )
    r = ev.run_task(task)
    assert r.metrics["jobs_total"] == 40
    (note,) = r.notes
    assert f"placement by heuristic '{TrainConfig().components.placement}'" in note and "trained for 20" in note


def test_latest_checkpoints_serve_where_there_is_no_best(run_dir: Path, tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "checkpoints" / "placement_best.zip").unlink()
    (task,) = ev.plan([f"ppo:{run}"], ["default"], [0], [{"workload.synthetic.num_jobs": "40"}])
    assert task.agent is not None and task.agent.checkpoints == ("ordering_best.zip", "placement_latest.zip")
    assert task.policy == "ppo:run"


def test_a_trace_is_evaluated_in_the_trace_scenario(tmp_path: Path):
    trace = tmp_path / "t.csv"
    rows = ["job_id,submit_time_s,duration_s,num_gpus"] + [
        f"{i},{i * 600},{3600 + 60 * i},{1 + i % 4}" for i in range(12)
    ]
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert evaluate.main(["--policies", "fifo", "--trace", str(trace), "--out", str(out)]) == 0
    (run,) = results(out)["runs"]
    assert run["scenario"] == "trace" and run["settings"] == {"workload.trace": str(trace)}
    assert run["metrics"]["jobs_total"] == 12 and run["metrics"]["jobs_finished"] == 12


# ---------------------------------------------------------------------------------------------- outputs
def test_plots_open_and_tensorboard_holds_the_means_and_the_images(local: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (group,) = (local / "plots").iterdir()
    for name in plots.PLOTS:
        with Image.open(group / f"{name}.png") as im:
            assert im.format == "PNG" and im.size[0] > 500 and im.size[1] > 400
    acc = EventAccumulator(str(local / "tb" / group.name), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    means = {a["policy"]: a["metrics"]["avg_jct_s"]["mean"] for a in results(local)["aggregates"]}
    assert acc.Scalars("eval/avg_jct_s/fifo")[0].value == pytest.approx(means["fifo"], rel=1e-6)
    assert {f"plots/{p}" for p in plots.PLOTS} <= set(acc.Tags()["images"])
    assert len([t for t in acc.Tags()["scalars"] if t.startswith("eval/avg_jct_s/")]) == 3


def test_plots_draw_the_data_they_claim():
    jct = {"a": [7200.0, 3600.0, 10800.0], "b": [1800.0]}
    fig = plots.jct_cdf(jct)
    (ax,) = fig.axes
    line = ax.lines[0]
    assert list(line.get_xdata()) == [1.0, 2.0, 3.0] and list(line.get_ydata()) == pytest.approx([1 / 3, 2 / 3, 1])
    fig = plots.fairness({"a": [0.5, 2.0, 1.2]})
    assert list(fig.axes[0].lines[0].get_ydata()) == [2.0, 1.2, 0.5]
    assert "unfair 67%" in fig.axes[0].lines[0].get_label()
    stat = ev.Stat
    bars = {"a": {k: stat(float(i + 1), 0.1, 0.2, 2) for i, (_, k) in enumerate(plots.CLASS_BARS)}}
    fig = plots.class_slowdown(bars)
    assert [p.get_height() for p in fig.axes[0].patches] == [1.0, 2.0, 3.0, 4.0]
    s = {"time": [0.0, 3600.0], "queue": [3, 1], "busy_training": [8, 4], "capacity_training": [16, 16]}
    s |= {"busy_loaned": [0, 4], "inference_gpus": [10, 12], "loaned_servers": [0, 1]}
    fig = plots.timeline({"a": s, "b": {k: [] for k in s}})
    assert list(fig.axes[3].lines[0].get_ydata()) == [0, 1] and list(fig.axes[0].lines[0].get_xdata()) == [0.0, 1.0]
    assert fig.axes[0].lines[1].get_label() == "b: no time series recorded"
    # every panel has a legend; two policies' lines differ in style and width (coinciding ones stay visible)
    fig = plots.timeline({"a": s, "b": s})
    assert all(ax.get_legend() is not None for ax in fig.axes)
    a, b = fig.axes[3].lines
    assert (a.get_linestyle(), a.get_linewidth()) != (b.get_linestyle(), b.get_linewidth())
    assert {"a", "b"} <= {t.get_text() for t in fig.axes[3].get_legend().get_texts()}


# ---------------------------------------------------------------------------------------------- user errors
def _bad_run(run_dir: Path, tmp_path: Path, **layout: int) -> Path:
    bad = tmp_path / "bad_run"
    shutil.copytree(run_dir, bad)
    data = json.loads((bad / "layout.json").read_text(encoding="utf-8")) | layout
    (bad / "layout.json").write_text(json.dumps(data), encoding="utf-8")
    return bad


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (["--policies", "fifo,nosuch"], "unknown policy 'nosuch'"),
        (["--policies", "ppo:/no/such/run"], "no such run folder"),
        (["--policies", "ppo:OLD"], "observation layout 1"),
        (["--policies", "ppo:SLOTS"], "job slots"),
        (["--policies", "ppo:DIMS"], "placement_obs_dim 7"),
        (["--policies", "ppo:BROKEN"], "checkpoints/ordering_best.zip does not load with this code"),
        (["--scenarios", "default,nosuch"], "unknown scenario 'nosuch'"),
        (["--set", "cluster.nosuch=1,2"], "unknown scenario setting 'cluster.nosuch'"),
        (["--set", "cluster.training_servers=4,x"], "expects an integer"),
        (["--set", "novalue"], "expects key=value"),
        (
            ["--scenarios", "dynamic", "--set", "dynamic.accordion_first_critical=0.9;0.1"],
            "must be a range lo;hi with lo <= hi, both in [0, 1)",
        ),
        (["--set", "workload.synthetic.gpu_demand=1:0.5;2:0.4"], "probabilities must sum to 1"),
        (["--set", "workload.synthetic.gpu_demand=1:0.5:2"], "expects 2 values"),
        (["--trace", "/no/such/trace.csv"], "trace"),
        (["--seeds", "a-b"], "--seeds"),
        (["--policies", "fifo", "--reference", "sjf"], "--reference sjf"),
    ],
)
def test_bad_arguments_exit_2_with_one_sentence_and_write_nothing(case, expected, run_dir, tmp_path, capsys):
    subs = {
        "ppo:OLD": f"ppo:{_bad_run(run_dir, tmp_path / 'o', obs_version=1)}",
        "ppo:SLOTS": f"ppo:{_bad_run(run_dir, tmp_path / 's', max_jobs=8)}",
        "ppo:DIMS": f"ppo:{_bad_run(run_dir, tmp_path / 'd', placement_obs_dim=7)}",
        "ppo:BROKEN": f"ppo:{_bad_run(run_dir, tmp_path / 'b')}",
    }
    (tmp_path / "b" / "bad_run" / "checkpoints" / "ordering_best.zip").write_bytes(b"not a zip")
    case = [subs.get(a, a) for a in case]
    out = tmp_path / "out"
    assert evaluate.main([*case, "--out", str(out)]) == 2
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("error:") and expected in text and "Traceback" not in text
    assert not out.exists()


def test_a_policy_the_engine_stops_is_one_sentence_on_exit_1_and_the_finished_tasks_stay(tmp_path: Path, capsys):
    """tiresias with promote_knob=0 promotes every waiting job at once and livelocks on seed 0
    (the engine stops it): the sentence names the task and its settings, and fifo's finished
    task keeps its file for a rerun."""
    out = tmp_path / "out"
    args = ["--policies", "fifo,tiresias", "--seeds", "0", "--set", "workload.synthetic.num_jobs=60"]
    args += ["--set", "workload.load=3.0", "--set", "tiresias.promote_knob=0", "--out", str(out)]
    assert evaluate.main(args) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("error: tiresias on scenario default, seed 0 (") and "Traceback" not in text
    assert "tiresias.promote_knob=0" in text and "livelock" in text and "1 of 2 task results are saved" in text
    assert len(list((out / "tasks").iterdir())) == 1 and not (out / "results.json").exists()


def test_bad_trace_file_from_the_command_line_is_one_line_on_exit_2(tmp_path: Path):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,num_gpus\n1,2\n", encoding="utf-8")
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, "evaluate.py", "--policies", "fifo", "--trace", str(bad), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert "Traceback" not in p.stderr + p.stdout and p.stdout.startswith("error:")
    assert not out.exists()


def test_task_files_are_per_task_and_hold_the_per_job_arrays(local: Path):
    files = sorted((local / "tasks").glob("*.json"))
    assert len(files) == 6
    doc = json.loads(files[0].read_text(encoding="utf-8"))
    jobs = doc["jobs"]
    assert len(jobs["jct_s"]) == len(jobs["rho"]) == doc["task"]["metrics"]["jobs_finished"]
    assert np.mean(jobs["jct_s"]) == pytest.approx(doc["task"]["metrics"]["avg_jct_s"], rel=1e-12)
    assert {"time", "queue", "busy_training", "busy_loaned", "loaned_servers"} <= set(doc["series"])
    assert "series" not in json.dumps(results(local)["runs"])
