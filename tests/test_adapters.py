"""Converters from the public trace formats (fixtures under tests/data/, made by hand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envs.sim.adapters import (
    ALIBABA2023_GPU_TYPES,
    AdapterReport,
    convert,
    from_alibaba2023,
    from_helios,
    from_pai,
    from_philly,
)
from envs.sim.model import GPU_TYPES, JobClass
from envs.sim.workload import ANY_GPU_TYPE, TraceError, TraceRow, load_trace

DATA = Path(__file__).resolve().parent / "data"


# --------------------------------------------------------------------------------------------
# Philly
# --------------------------------------------------------------------------------------------


def test_philly_rows() -> None:
    rows, _ = from_philly(DATA / "philly_small.json")
    assert rows == [
        # submitted 2017-09-30 23:50, the earliest: rebased to 0; one day on 8 GPUs
        TraceRow(name="application_9", submit_time=0.0, duration=86400.0, num_gpus=8, user="u6", vc="vc4"),
        # Pass, one attempt 00:10-01:10 on 2 GPUs
        TraceRow(name="application_1", submit_time=600.0, duration=3600.0, num_gpus=2, user="u1", vc="vc1"),
        # Killed after two attempts of 10 and 30 minutes on 2+2 and 4 GPUs: kept, 40 minutes on 4
        TraceRow(name="application_2", submit_time=900.0, duration=2400.0, num_gpus=4, user="u2", vc="vc1"),
        # Failed; the first attempt has no end time (skipped), the second ran 10 minutes
        TraceRow(name="application_3", submit_time=2400.0, duration=600.0, num_gpus=1, user="u1", vc="vc2"),
    ]


def test_philly_report() -> None:
    _, report = from_philly(DATA / "philly_small.json")
    assert report == AdapterReport(
        kept=4,
        dropped={
            "cpu_only": 1,  # application_7: empty gpus list
            "duplicate_job_id": 1,  # second application_1
            "malformed": 2,  # a string in the list; application_10's submitted_time "yesterday"
            "missing_times": 1,  # application_5: its only attempt has no times
            "never_started": 1,  # application_4: no attempts
            "no_submit_time": 1,  # application_8
            "still_running": 1,  # application_6: last attempt started, no end
        },
    )
    assert report.describe() == (
        "kept 4 jobs; dropped 8 (cpu_only 1, duplicate_job_id 1, malformed 2, missing_times 1, "
        "never_started 1, no_submit_time 1, still_running 1)"
    )


def test_philly_not_json(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text('[{"jobid": 1,,}]')
    with pytest.raises(TraceError, match=r"log\.json, line 1: not valid JSON"):
        from_philly(path)


def test_philly_not_a_list(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"jobid": "x"}))
    with pytest.raises(TraceError, match=r"log\.json: expected a JSON list of jobs, got a JSON dict\."):
        from_philly(path)


def test_philly_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.json: no such file\."):
        from_philly(tmp_path / "nope.json")


# --------------------------------------------------------------------------------------------
# PAI
# --------------------------------------------------------------------------------------------


def test_pai_rows() -> None:
    rows, _ = from_pai(DATA / "pai_job_table.csv", DATA / "pai_task_table.csv")
    assert rows == [
        # submitted at 900 (the earliest): 1 instance at 25% of a MISC GPU -> 1 whole GPU, any type
        TraceRow(name="p3", submit_time=0.0, duration=1000.0, num_gpus=1, gpu_types=ANY_GPU_TYPE, user="userA"),
        # 2 instances x 100% V100 (PAI's V100 has 16 GB), tasks ran 1100-4100
        TraceRow(
            name="p1",
            submit_time=100.0,
            duration=3000.0,
            num_gpus=2,
            gpu_types=frozenset({"V100-16GB"}),
            user="userA",
        ),
        # Failed: a CPU-only ps (1250-2250) and 4 workers at 50% of a T4 (1300-2300): 4 GPUs,
        # run time from the first task start to the last task end; the ps's MISC type is ignored
        TraceRow(
            name="p2",
            submit_time=300.0,
            duration=1050.0,
            num_gpus=4,
            gpu_types=frozenset({"T4-16GB"}),
            user="userB",
        ),
        # 150% of a P100 -> 2 GPUs, plus 1 V100M32: 3 GPUs of either type; tasks 1650-2700
        TraceRow(
            name="p7",
            submit_time=700.0,
            duration=1050.0,
            num_gpus=3,
            gpu_types=frozenset({"P100-16GB", "V100-32GB"}),
            user="userE",
        ),
    ]


def test_pai_report() -> None:
    _, report = from_pai(DATA / "pai_job_table.csv", DATA / "pai_task_table.csv")
    assert report == AdapterReport(
        kept=4,
        dropped={
            "cpu_only": 1,  # p6: plan_gpu 0
            "duplicate_job_id": 1,  # second p1 row
            "malformed": 1,  # "bad,row"
            "never_started": 2,  # p4 (Waiting), p8 (no task rows)
            "no_submit_time": 1,  # p9
            "orphan_task_rows": 2,  # two task rows of "ghost", not in the job table
            "still_running": 1,  # p5
        },
    )


def test_pai_skips_a_header_row_and_marks_broken_tasks(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    tasks = tmp_path / "tasks.csv"
    jobs.write_text(
        "job_name,inst_id,user,status,start_time,end_time\nj1,i1,u,Terminated,10,100\nj2,i2,u,Failed,20,90\n"
    )
    tasks.write_text(
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
        "j1,worker,1,Terminated,15,95,100,1,100,v100\n"
        "j2,worker,1,Failed,25\n"
    )
    rows, report = from_pai(jobs, tasks)
    assert rows == [
        TraceRow(
            name="j1",
            submit_time=0.0,
            duration=80.0,
            num_gpus=1,
            gpu_types=frozenset({"V100-16GB"}),
            user="u",
        )
    ]
    assert report.dropped == {"malformed": 1}


# --------------------------------------------------------------------------------------------
# Helios
# --------------------------------------------------------------------------------------------


def test_helios_rows() -> None:
    rows, _ = from_helios(DATA / "helios_small.csv")
    assert rows == [
        TraceRow(name="h1", submit_time=0.0, duration=7200.0, num_gpus=8, user="u1", vc="vcA"),
        # FAILED after 600 s: kept
        TraceRow(name="h2", submit_time=120.0, duration=600.0, num_gpus=1, user="u2", vc="vcB"),
        # CANCELLED after it ran 1000 s: kept
        TraceRow(name="h4", submit_time=240.0, duration=1000.0, num_gpus=4, user="u1", vc="vcA"),
        # NODE_FAIL with an empty duration: end - start = 1 h
        TraceRow(name="h7", submit_time=420.0, duration=3600.0, num_gpus=16, user="u4", vc="vcC"),
    ]


def test_helios_report() -> None:
    _, report = from_helios(DATA / "helios_small.csv")
    assert report == AdapterReport(
        kept=4,
        dropped={
            "cpu_only": 1,  # h5
            "duplicate_job_id": 1,  # second h1
            "malformed": 2,  # h9 (gpu_num "two"), h10 (short row)
            "never_started": 1,  # h3: cancelled in the queue
            "still_running": 1,  # h8
            "zero_duration": 1,  # h6
        },
    )


def test_helios_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    path.write_text("job_id,user,submit_time\nx,u,2020-01-01 00:00:00\n")
    with pytest.raises(TraceError, match=r"cluster_log\.csv, line 1: the header lacks the Helios column\(s\) gpu_num"):
        from_helios(path)


def test_helios_numeric_times(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        "job_id,user,vc,gpu_num,state,submit_time,start_time,end_time,duration\n"
        "b,u,v,2,COMPLETED,1500,1600,1700,\n"
        "a,u,v,1,COMPLETED,1000,1010,1110,100\n"
    )
    rows, report = from_helios(path)
    assert [(r.name, r.submit_time, r.duration, r.num_gpus) for r in rows] == [
        ("a", 0.0, 100.0, 1),
        ("b", 500.0, 100.0, 2),
    ]
    assert report == AdapterReport(kept=2, dropped={})
    assert report.describe() == "kept 2 jobs; dropped none"


# --------------------------------------------------------------------------------------------
# convert
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "inputs", "adapter"),
    [
        ("philly", ["philly_small.json"], lambda: from_philly(DATA / "philly_small.json")),
        (
            "PAI",
            ["pai_job_table.csv", "pai_task_table.csv"],
            lambda: from_pai(DATA / "pai_job_table.csv", DATA / "pai_task_table.csv"),
        ),
        ("helios", ["helios_small.csv"], lambda: from_helios(DATA / "helios_small.csv")),
    ],
)
def test_convert_writes_a_loadable_trace(tmp_path: Path, fmt: str, inputs: list[str], adapter: object) -> None:
    out = tmp_path / "out.csv"
    report = convert(fmt, [str(DATA / name) for name in inputs], str(out))
    rows, expected = adapter()  # type: ignore[operator]
    assert report == expected
    assert load_trace(out) == rows
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_convert_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown trace format 'slurm'"):
        convert("slurm", ["x"], str(tmp_path / "o.csv"))
    with pytest.raises(ValueError, match="the pai format takes a job table and a task table, got 1"):
        convert("pai", [str(DATA / "pai_job_table.csv")], str(tmp_path / "o.csv"))


def test_convert_with_nothing_left(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]")
    with pytest.raises(TraceError, match=r"empty\.json: no job left to convert \(kept 0 jobs; dropped none\)\."):
        convert("philly", [str(path)], str(tmp_path / "o.csv"))
    assert not (tmp_path / "o.csv").exists()


# --------------------------------------------------------------------------------------------
# Alibaba GPU 2023 pod list
# --------------------------------------------------------------------------------------------

POD_LIST = DATA / "openb_pod_list_small.csv"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
TE, BE = JobClass.TE, JobClass.BE
V100S = frozenset({"V100-16GB", "V100-32GB"})


def test_alibaba2023_rows() -> None:
    rows, _ = from_alibaba2023(POD_LIST)
    assert rows == [
        # created at 9,999,000 (the earliest, on the file's second-last line): rebased to 0; alive
        # when the trace was cut at 12,902,960, kept with its run time cut there
        TraceRow(
            name="openb-pod-0099", submit_time=0.0, duration=2903960.0, num_gpus=1, gpu_types=ANY_GPU_TYPE, job_class=TE
        ),
        # scheduled 10 s after creation: the run time is deletion - scheduling, 3600 - 10
        TraceRow(
            name="openb-pod-0100", submit_time=1000.0, duration=3590.0, num_gpus=8, gpu_types=ANY_GPU_TYPE, job_class=BE
        ),
        # 460 milli-GPUs: rounded up to one whole GPU
        TraceRow(
            name="openb-pod-0101", submit_time=1100.0, duration=1000.0, num_gpus=1, gpu_types=ANY_GPU_TYPE, job_class=TE
        ),
        TraceRow(name="openb-pod-0102", submit_time=1200.0, duration=595.0, num_gpus=1, gpu_types=V100S, job_class=TE),
        # 220 milli-GPUs of a T4
        TraceRow(
            name="openb-pod-0103",
            submit_time=1300.0,
            duration=300.0,
            num_gpus=1,
            gpu_types=frozenset({"T4-16GB"}),
            job_class=BE,
        ),
        # Failed after 299 s: kept; G2 and V100M32 both become V100-32GB
        TraceRow(
            name="openb-pod-0104",
            submit_time=1400.0,
            duration=299.0,
            num_gpus=1,
            gpu_types=frozenset({"V100-32GB", "P100-16GB", "T4-16GB", "V100-16GB"}),
            job_class=BE,
        ),
        TraceRow(name="openb-pod-0105", submit_time=1500.0, duration=1000.0, num_gpus=1, gpu_types=V100S, job_class=TE),
        TraceRow(
            name="openb-pod-0106",
            submit_time=1600.0,
            duration=3540.0,
            num_gpus=2,
            gpu_types=frozenset({"A100-40GB"}),
            job_class=TE,
        ),
        TraceRow(
            name="openb-pod-0107",
            submit_time=1700.0,
            duration=200.0,
            num_gpus=4,
            gpu_types=frozenset({"A10-24GB"}),
            job_class=BE,
        ),
        # no QoS: the class is left to the sampler
        TraceRow(name="openb-pod-0113", submit_time=2400.0, duration=300.0, num_gpus=1, gpu_types=ANY_GPU_TYPE),
    ]


def test_alibaba2023_report() -> None:
    _, report = from_alibaba2023(POD_LIST)
    assert report == AdapterReport(
        kept=10,
        dropped={
            "cpu_only": 1,  # openb-pod-0108: num_gpu 0
            "duplicate_job_id": 1,  # second openb-pod-0101
            "never_started": 2,  # openb-pod-0109, openb-pod-0114: Pending, never scheduled
            "no_submit_time": 1,  # openb-pod-0112
            "still_running": 1,  # openb-pod-0111: scheduled, no deletion time
            "zero_duration": 1,  # openb-pod-0110: deleted the second it was scheduled
        },
    )


def test_alibaba2023_maps_onto_known_types() -> None:
    assert set(ALIBABA2023_GPU_TYPES.values()) <= set(GPU_TYPES)


@pytest.mark.parametrize(
    ("content", "sentence"),
    [
        (
            "name,num_gpu,creation_time,scheduled_time\np,1,0,0\n",
            "pods.csv, line 1: the header lacks the Alibaba GPU 2023 pod-list column(s) deletion_time.",
        ),
        (
            POD_HEADER
            + "p1,4000,16384,1,1000,T4,LS,Running,0,100,0\np2,4000,16384,1,1000,T4|H100,LS,Running,0,100,0\n",
            "pods.csv, line 3, column gpu_spec: unknown GPU type 'H100' "
            "(known: A10, G1, G2, G3, P100, T4, V100M16, V100M32).",
        ),
        (
            POD_HEADER + "p1,4000,16384,1,1000,,LS,Running,yesterday,100,0\n",
            "pods.csv, line 2, column creation_time: expected a time in seconds, got 'yesterday'.",
        ),
        (
            POD_HEADER + "p1,4000,16384,1,1000,,LS,Running,0,inf,0\n",
            "pods.csv, line 2, column deletion_time: expected a time in seconds, got 'inf'.",
        ),
        (
            POD_HEADER + "p1,4000,16384,1,1000,,Critical,Running,0,100,0\n",
            "pods.csv, line 2, column qos: unknown QoS class 'Critical' (known: BE, Burstable, Guaranteed, LS).",
        ),
        (
            POD_HEADER + "p1,4000,16384,1.5,1000,,LS,Running,0,100,0\n",
            "pods.csv, line 2, column num_gpu: expected a whole number of GPUs >= 0, got '1.5'.",
        ),
        (
            POD_HEADER + ",4000,16384,1,1000,,LS,Running,0,100,0\n",
            "pods.csv, line 2, column name: the pod name is empty.",
        ),
        (POD_HEADER + "p1,4000,16384,1,1000,,LS\n", "pods.csv, line 2: the row has 7 fields but the header has 11."),
        ("", "pods.csv: the file is empty; expected an Alibaba GPU 2023 openb_pod_list_*.csv with a header row."),
    ],
)
def test_alibaba2023_bad_file_is_one_sentence(tmp_path: Path, content: str, sentence: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TraceError) as err:
        from_alibaba2023(path)
    assert str(err.value) == f"{tmp_path}/{sentence}"


def test_alibaba2023_names_in_any_case_another_map_and_absent_columns(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER + "p1,4000,16384,1,1000,g3|v100m32,ls,Running,50,150,60\n", encoding="utf-8")
    (row,) = from_alibaba2023(path)[0]
    assert (row.gpu_types, row.job_class, row.submit_time, row.duration) == (
        frozenset({"A100-40GB", "V100-32GB"}),
        TE,
        0.0,
        90.0,
    )
    (row,) = from_alibaba2023(path, type_map={"G3": "A10-24GB", "V100M32": "V100-32GB"})[0]
    assert row.gpu_types == frozenset({"A10-24GB", "V100-32GB"})
    with pytest.raises(TraceError, match=r"unknown GPU type 'g3' \(known: V100M32\)\.$"):
        from_alibaba2023(path, type_map={"V100M32": "V100-32GB"})
    # without gpu_spec and qos columns the trace says nothing: both are left to the sampler
    path.write_text("name,num_gpu,creation_time,deletion_time,scheduled_time\np1,2,0,100,0\n", encoding="utf-8")
    (row,) = from_alibaba2023(path)[0]
    assert (row.gpu_types, row.job_class, row.num_gpus) == (None, None, 2)


def test_alibaba2023_converts_and_replays_under_evaluate(tmp_path: Path) -> None:
    converted = tmp_path / "alibaba.csv"
    report = convert("alibaba2023", [str(POD_LIST)], str(converted))
    rows, expected = from_alibaba2023(POD_LIST)
    assert report == expected
    assert load_trace(converted) == rows
    # a training pool holding every type the file names, so that every job can run
    mix = "V100-32GB:1;V100-16GB:1;P100-16GB:1;T4-16GB:1;A100-40GB:1;A10-24GB:1"
    out = tmp_path / "out"
    cmd = [sys.executable, "evaluate.py", "--policies", "fifo,sjf", "--trace", str(converted), "--out", str(out)]
    cmd += ["--set", f"cluster.training_mix={mix}", "--set", "cluster.inference_servers=0"]
    p = subprocess.run(cmd, cwd=DATA.parent.parent, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    runs = json.loads((out / "results.json").read_text(encoding="utf-8"))["runs"]
    assert sorted(run["policy"] for run in runs) == ["fifo", "sjf"]
    for run in runs:
        assert (run["metrics"]["jobs_total"], run["metrics"]["jobs_finished"]) == (len(rows), len(rows))
