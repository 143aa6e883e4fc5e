"""Jobs that can never run are refused (or dropped for every policy alike) before a run starts,
a run that ends with jobs unfinished says so, and a trace can be replayed at a chosen load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents import evaluation as ev
from envs.sim import scenarios
from envs.sim.feasibility import UnrunnableError, loanable_servers, pool_capacity, unrunnable
from envs.sim.inference import DemandCurve, InferenceConfig
from envs.sim.model import T4, V100, JobSpec, Pool, ServerSpec
from envs.sim.workload import MAX_SECONDS, TraceError, load_trace, offered_load

ROOT = Path(__file__).resolve().parent.parent
HEADER = "job_id,submit_time_s,duration_s,num_gpus,gpu_type\n"
MIXED = "cluster.training_mix=V100-32GB:6;A100-40GB:4"


def _trace(tmp_path: Path, rows: str, name: str = "t.csv") -> str:
    path = tmp_path / name
    path.write_text(HEADER + rows, encoding="utf-8")
    return str(path)


def _evaluate(*args: str, out: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "evaluate.py", "--workers", "1", *args] + (["--out", str(out)] if out else [])
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _sentence(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    text = " ".join(proc.stdout.split())
    assert text.startswith("error:") and text.endswith(".")
    return text


def test_an_unknown_gpu_type_names_file_line_value_and_the_known_types(tmp_path: Path):
    trace = _trace(tmp_path, "a,0,3600,1,G2\nb,10,3600,1,V100-32GB\n")
    out = tmp_path / "out"
    text = _sentence(_evaluate("--policies", "fifo,sjf", "--trace", trace, out=out))
    assert "t.csv, line 2, column gpu_type" in text and "'G2'" in text
    assert all(t in text for t in ("V100-32GB", "T4-16GB", "A100-40GB")) and "gpu_type_map" in text
    assert not out.exists()


def test_the_gpu_type_map_maps_a_traces_own_names(tmp_path: Path):
    rows = load_trace(
        _trace(tmp_path, "a,0,3600,1,G2|V100M32\n"), gpu_type_map={"G2": "A100-40GB", "V100M32": "V100-32GB"}
    )
    assert rows[0].gpu_types == frozenset({"A100-40GB", "V100-32GB"})
    s = scenarios.get(
        "trace", {"workload.trace": str(tmp_path / "t.csv"), "workload.gpu_type_map": "G2:A100-40GB;V100M32:V100-32GB"}
    )
    assert scenarios.build(s, 0).jobs[0].gpu_types == frozenset({"A100-40GB", "V100-32GB"})


def test_a_job_no_pool_holds_is_one_sentence_with_count_rows_and_reason(tmp_path: Path):
    trace = _trace(tmp_path, "a,0,3600,1,V100-32GB\nb,5,3600,60,V100-32GB|A100-40GB\nc,9,3600,64,\n")
    text = _sentence(
        _evaluate("--policies", "fifo", "--trace", trace, "--set", MIXED, "--set", "cluster.inference_servers=0")
    )
    assert "2 of 3 jobs" in text and "line 3, job 'b' asks for 60 GPUs" in text and "line 4, job 'c'" in text
    assert "the most one pool it may use holds is 48 (V100-32GB, training)" in text
    assert "--set workload.unrunnable=drop" in text


def test_a_job_pinned_to_the_inference_type_is_refused_only_beside_a_policy_that_never_borrows(tmp_path: Path):
    trace = _trace(tmp_path, "a,0,3600,1,T4-16GB\nb,10,3600,1,V100-32GB\n")
    text = _sentence(_evaluate("--policies", "aryl,fifo", "--trace", trace))
    assert "policy 'fifo' never borrows" in text and "1 of 2 jobs" in text and "job 'a'" in text
    proc = _evaluate("--policies", "aryl", "--trace", trace)  # aryl alone borrows: both jobs run
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_drop_leaves_the_same_jobs_out_for_every_policy_and_says_so(tmp_path: Path):
    trace = _trace(tmp_path, "a,0,3600,1,T4-16GB\nb,10,3600,1,V100-32GB\nc,20,3600,2,\n")
    out = tmp_path / "out"
    proc = _evaluate("--policies", "aryl,fifo", "--trace", trace, "--set", "workload.unrunnable=drop", out=out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "results.json").read_text())
    for run in doc["runs"]:  # aryl could run job a, but drops it with fifo's jobs
        assert (run["metrics"]["jobs_total"], run["metrics"]["jobs_dropped"], run["metrics"]["jobs_unfinished"]) == (
            2,
            1,
            0,
        )
        assert any("1 job the cluster can never run left out" in n for n in run["notes"])
    assert doc["meta"]["workloads"] == [
        {"scenario": "trace", "settings": {"workload.trace": trace, "workload.unrunnable": "drop"}, "seed": 0}
        | {"jobs_total": 2, "jobs_dropped": 1, "offered_load": doc["runs"][0]["metrics"]["offered_load"]}
    ]
    assert "dropped as unrunnable" in proc.stdout


def test_the_loans_of_the_curves_trough_bound_what_an_inference_pinned_job_may_ask(tmp_path: Path):
    s = scenarios.get("trace")
    built = scenarios.build(s, 0)
    loans = loanable_servers(built.demand)
    assert 0 < loans < s.cluster.inference_servers  # the trough still needs some servers
    cap = pool_capacity(built.servers, built.demand, borrowing=True)
    assert cap[("T4-16GB", Pool.INFERENCE)] == 8 * loans and ("T4-16GB", Pool.INFERENCE) not in pool_capacity(
        built.servers, built.demand, borrowing=False
    )
    trace = _trace(tmp_path, f"a,0,3600,{8 * loans},T4-16GB\nb,0,3600,{8 * loans + 1},T4-16GB\n")
    with pytest.raises(UnrunnableError, match=r"1 of 2 jobs .* job 'b' asks for"):
        scenarios.build(scenarios.get("trace", {"workload.trace": trace}), 0)


def test_unrunnable_lists_each_job_with_its_reason():
    servers = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, T4, 8, Pool.INFERENCE)]
    demand = DemandCurve(InferenceConfig(mean_utilization=0.0, headroom=0.0), 1)  # lends its one server
    jobs = [
        JobSpec(0, "ok", 0.0, 60.0, 8, 8, 8, "resnet50"),
        JobSpec(1, "big", 0.0, 60.0, 16, 16, 16, "resnet50"),
        JobSpec(2, "t4", 0.0, 60.0, 2, 2, 2, "resnet50", gpu_types=frozenset({"T4-16GB"})),
    ]
    bad = unrunnable(jobs, servers, demand, borrowing=False)
    assert [(b.index, b.name, b.with_loans) for b in bad] == [(1, "big", False), (2, "t4", True)]
    assert (
        bad[0].reason
        == "asks for 16 GPUs of any GPU type, but the most one pool it may use holds is 8 (V100-32GB, training)"
    )
    assert bad[1].reason == (
        "asks for 2 GPUs of one type among T4-16GB, but no pool it may use has such GPUs; "
        "a policy that borrows could run it"
    )
    assert [b.name for b in unrunnable(jobs, servers, demand, borrowing=True)] == ["big"]


def test_a_run_cut_at_the_horizon_notes_it_and_computes_no_ratio_with_it(tmp_path: Path):
    out = tmp_path / "out"
    sets = ["--set", "workload.synthetic.num_jobs=40", "--set", "sim.horizon_s=30000"]
    proc = _evaluate("--policies", "fifo,sjf", *sets, out=out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "results.json").read_text())
    run = doc["runs"][0]
    assert run["metrics"]["jobs_unfinished"] > 0
    assert any("unfinished at the horizon" in n for n in run["notes"])
    assert all(r["why"] and all(v is None for v in r["metrics"].values()) for r in doc["ratios"])
    text = " ".join(proc.stdout.split())
    assert "fifo (!)" in text and "(unfinished)" in text and "left jobs unfinished" in text


def test_complete_runs_get_their_ratios():
    tasks = ev.plan(["fifo", "sjf"], ["default"], [0], [{"workload.synthetic.num_jobs": "30"}])
    doc = ev.results_document(ev.execute(tasks), ["x"], "fifo")
    assert all(r["why"] is None and r["metrics"]["avg_jct_s"] is not None for r in doc["ratios"])


def test_a_trace_replays_at_a_chosen_offered_load_keeping_deadline_slack(tmp_path: Path):
    trace = tmp_path / "d.csv"
    trace.write_text(
        "job_id,submit_time_s,duration_s,num_gpus,deadline_s\na,100,3600,8,5000\nb,1100,7200,4,\nc,2100,1800,2,4000\n"
    )
    base = scenarios.get("trace", {"workload.trace": str(trace)})
    gpus = 512
    before = scenarios.build(base, 0).jobs
    after = scenarios.build(scenarios.get("trace", {"workload.trace": str(trace), "workload.load": "0.5"}), 0).jobs
    assert offered_load(after, gpus) == pytest.approx(0.5)
    f = offered_load(before, gpus) / 0.5  # type: ignore[operator]
    assert [j.submit_time for j in after] == pytest.approx([j.submit_time * f for j in before])
    assert [j.duration for j in after] == [j.duration for j in before]
    assert after[0].deadline - after[0].submit_time == pytest.approx(4900.0)  # type: ignore[operator]
    assert after[2].deadline - after[2].submit_time == pytest.approx(1900.0)  # type: ignore[operator]


def test_a_trace_whose_every_job_is_unrunnable_is_refused_even_under_drop(tmp_path: Path):
    trace = _trace(tmp_path, "a,0,3600,1000,\n")
    text = _sentence(_evaluate("--policies", "fifo", "--trace", trace, "--set", "workload.unrunnable=drop"))
    assert "1 of 1 jobs" in text and "nothing is left to run" in text


def test_a_trace_arriving_at_one_instant_cannot_be_set_to_a_load(tmp_path: Path):
    trace = _trace(tmp_path, "a,0,3600,1,\nb,0,3600,1,\n")
    text = _sentence(_evaluate("--policies", "fifo", "--trace", trace, "--set", "workload.load=0.8"))
    assert "all arrive at one instant" in text


@pytest.mark.parametrize(("column", "cell"), [("duration_s", "1e9"), ("submit_time_s", "1e308")])
def test_times_beyond_ten_years_are_refused_with_their_line(tmp_path: Path, column: str, cell: str):
    rows = "a,0,3600,1,\n" + ("b,0," + cell + ",1,\n" if column == "duration_s" else f"b,{cell},3600,1,\n")
    with pytest.raises(TraceError, match=rf"line 3, column {column}: expected a .*ten years"):
        load_trace(_trace(tmp_path, rows))
    assert MAX_SECONDS == 10 * 365 * 86400
