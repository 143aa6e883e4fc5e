"""The pathological inputs of the input issue end within 60 s and 2 GB, each as a real command.

Each case runs ``evaluate.py`` in a subprocess under a watchdog (the subprocess timeout: a hang
fails the test, it does not stall the suite) and checks its peak memory (``ru_maxrss`` of the
finished child) and its answer: one sentence on exit 2 for an input that cannot run, every job
finished for one that can. Not a timed assertion: the 60 s bound is the watchdog.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WATCHDOG_S = 60
MEMORY_KB = 2 * 1024 * 1024  # ru_maxrss is in KiB on Linux


def _run(args: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
    """The command's result and the peak RSS (KiB) of the largest child finished so far."""
    proc = subprocess.run(
        [sys.executable, "evaluate.py", "--workers", "1", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WATCHDOG_S,
    )
    return proc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def _trace(tmp_path: Path, rows: list[str]) -> str:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_type\n" + "\n".join(rows) + "\n")
    return str(path)


REFUSED = [
    (["a,0,1e308,1,"], [], "ten years"),
    (["a,0,1e9,1,"], [], "ten years"),
    (["a,1e308,600,1,"], [], "ten years"),
    (["a,0,600,1,"], ["--set", "inference.step_s=0"], "'inference.step_s=0' must be >= 1"),
    (["a,0,600,1,"], ["--set", "policy.round_s=-60", "--policies", "tiresias"], "'round_s=-60' must be >= 1"),
    (
        ["a,0,20000,32,", "b,0,20000,32,", "c,10,20000,60,"],
        ["--set", "cluster.training_mix=V100-32GB:6;A100-40GB:4", "--policies", "tiresias"],
        "can never run",
    ),
    (["a,0,600,1,G2", "b,0,600,1,V100-32GB"], ["--policies", "fifo,sjf"], "unknown GPU type 'G2'"),
    (["a,0,600,383,T4-16GB"], ["--policies", "aryl"], "can never run"),
]


@pytest.mark.parametrize(("rows", "args", "words"), REFUSED)
def test_a_pathological_input_is_refused_in_one_sentence(tmp_path: Path, rows: list[str], args: list[str], words: str):
    proc, peak = _run(["--trace", _trace(tmp_path, rows), *args, "--out", str(tmp_path / "out")])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in " ".join(proc.stdout.split()) and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
    assert peak < MEMORY_KB


@pytest.mark.parametrize("seeds", ["-3", "0-99999999999"])
def test_absurd_seed_ranges_are_refused(seeds: str, tmp_path: Path):
    proc, peak = _run(["--policies", "fifo", "--seeds", seeds])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and peak < MEMORY_KB


def test_a_burst_of_5000_jobs_at_one_instant_finishes_for_tiresias_within_the_watchdog(tmp_path: Path):
    rows = [f"j{i},0,{600 + (i * 7919) % 20000},{1 + i % 4}," for i in range(5000)]
    proc, peak = _run(["--policies", "tiresias", "--trace", _trace(tmp_path, rows), "--out", str(tmp_path / "o")])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = json.loads((tmp_path / "o" / "results.json").read_text())["runs"]
    assert run["metrics"]["jobs_finished"] == 5000 and run["metrics"]["jobs_unfinished"] == 0
    assert peak < MEMORY_KB
