"""evaluate.py stopped by a signal, and flags it refuses before running anything.

A Ctrl-C (SIGINT to the process group, as a terminal sends it) or a SIGTERM stops a sweep at
once on every backend: exit status 130, a line saying how to resume, every finished task file
intact, and the same command then resumes from them. A second Ctrl-C exits at once. The signals
are real, sent to a real ``evaluate.py``; the timeouts are watchdogs that stop a hang, not timed
assertions. Bad ``--seeds`` and ``--out`` are one sentence, exit 2, nothing written.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evaluate
from agents import evaluation as ev
from envs.sim.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
#: 82 tasks of about 0.2 s each: some seconds of work, so that a signal lands in the middle
SWEEP = ["--policies", "fifo,sjf", "--seeds", "0-40"]
TASKS = 82
RESUME = "rerun the same command with the same --out to resume"
WATCHDOG_S = 120.0  # only stops a hang (Ray alone takes some 20 s to start here)


def start(out: Path, *extra: str) -> subprocess.Popen[str]:
    """evaluate.py in its own session, so that a signal to its process group is what a Ctrl-C at
    its terminal would be (workers included)."""
    return subprocess.Popen(
        [sys.executable, "evaluate.py", *SWEEP, "--out", str(out), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def task_files(out: Path) -> list[Path]:
    return sorted((out / "tasks").glob("*.json"))


def wait_for_tasks(proc: subprocess.Popen[str], out: Path, n: int = 2) -> None:
    """Until ``n`` task files exist (the sweep is under way)."""
    deadline = time.monotonic() + WATCHDOG_S
    while len(task_files(out)) < n:
        if proc.poll() is not None or time.monotonic() > deadline:
            finish(proc)
            pytest.fail(f"no {n} task files appeared: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The process's output once it has exited; killed (and the test failed) if it hangs."""
    try:
        return proc.communicate(timeout=WATCHDOG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"evaluate.py did not exit within {WATCHDOG_S:.0f} s of the signal")


def ctrl_c(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone (after a first signal)
        os.killpg(proc.pid, signal.SIGINT)


def check_interrupted(out: Path, stdout: str, stderr: str, rc: int = 130) -> list[Path]:
    """What an interrupted sweep leaves: its exit status, the resume line with the count of task
    files, those files whole, no temporary file, no results, no traceback; the files."""
    assert rc == 130, stderr[-3000:]
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    files = task_files(out)
    line = next(x for x in stdout.splitlines() if x.startswith("interrupted"))
    assert f"{len(files)} of {TASKS} task results are saved in {out / 'tasks'}" in line and RESUME in line
    assert 1 <= len(files) < TASKS
    for f in files:
        doc = json.loads(f.read_text(encoding="utf-8"))
        assert doc["version"] == ev.TASK_FILE_VERSION and doc["task"]["metrics"]["avg_jct_s"] > 0
    assert not list((out / "tasks").glob(".*")), "a temporary file was left behind"
    assert not (out / "results.json").exists(), "the sweep finished before the signal"
    return files


def test_ctrl_c_stops_a_pool_sweep_and_the_same_command_resumes(tmp_path: Path):
    out = tmp_path / "r"
    proc = start(out, "--workers", "2")
    wait_for_tasks(proc, out)
    ctrl_c(proc)
    stdout, stderr = finish(proc)
    files = check_interrupted(out, stdout, stderr, proc.returncode)
    before = {f.name: f.read_bytes() for f in files}

    again = subprocess.run(
        [sys.executable, "evaluate.py", *SWEEP, "--out", str(out), "--workers", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WATCHDOG_S * 3,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"reused {len(files)} of {TASKS} task results" in again.stdout
    assert len(task_files(out)) == TASKS
    assert {f.name: f.read_bytes() for f in files} == before  # reused as they were
    runs = json.loads((out / "results.json").read_text(encoding="utf-8"))["runs"]
    assert [(r["policy"], r["seed"]) for r in runs] == [(p, s) for p in ("fifo", "sjf") for s in range(41)]


def test_ctrl_c_stops_an_inline_sweep(tmp_path: Path):
    out = tmp_path / "r"
    proc = start(out, "--workers", "1")
    wait_for_tasks(proc, out)
    ctrl_c(proc)
    check_interrupted(out, *finish(proc), proc.returncode)


def test_sigterm_stops_a_sweep_as_ctrl_c_does(tmp_path: Path):
    """``kill PID``: the signal reaches evaluate.py alone, which stops its workers itself."""
    out = tmp_path / "r"
    proc = start(out, "--workers", "2")
    wait_for_tasks(proc, out)
    proc.send_signal(signal.SIGTERM)
    check_interrupted(out, *finish(proc), proc.returncode)


def test_a_second_ctrl_c_exits_at_once_and_leaves_whole_task_files(tmp_path: Path):
    """The second one lands while the first is handled, or as the process exits: either way it
    ends promptly (it used to deadlock until kill -9), by 130 or by SIGINT itself, and every task
    file there is whole."""
    out = tmp_path / "r"
    proc = start(out, "--workers", "2")
    wait_for_tasks(proc, out)
    ctrl_c(proc)
    time.sleep(0.2)
    ctrl_c(proc)
    stdout, stderr = finish(proc)
    assert proc.returncode in (130, -signal.SIGINT), stderr[-3000:]
    assert "Traceback" not in stdout + stderr
    files = task_files(out)
    assert 1 <= len(files) < TASKS
    for f in files:
        assert json.loads(f.read_text(encoding="utf-8"))["version"] == ev.TASK_FILE_VERSION


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaps counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


SLOW_CLEANUP = """
import multiprocessing, time
from agents import evaluation as ev
from envs.sim.config import ConfigError

with ev.interrupts():
    worker = multiprocessing.Process(target=time.sleep, args=(600,))
    worker.start()
    try:  # the pid is printed inside it, so a signal sent on reading the pid lands in the try
        print(worker.pid, flush=True)
        time.sleep(600)
    except KeyboardInterrupt:
        print("cleaning up", flush=True)
        time.sleep(600)  # a cleanup that would never end
"""


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM])
def test_the_next_signal_during_a_slow_cleanup_kills_the_workers_and_exits_130(first: signal.Signals):
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_CLEANUP], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        proc.send_signal(first)  # raises KeyboardInterrupt, SIGTERM as SIGINT
        assert proc.stdout.readline().strip() == "cleaning up"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=WATCHDOG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted again: stopped at once" in stderr
    deadline = time.monotonic() + WATCHDOG_S
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(worker)


def test_ctrl_c_stops_a_ray_sweep(tmp_path: Path):
    pytest.importorskip("ray")
    out = tmp_path / "r"
    proc = start(out, "--backend", "ray", "--workers", "2")
    wait_for_tasks(proc, out)
    ctrl_c(proc)
    check_interrupted(out, *finish(proc), proc.returncode)


# ---------------------------------------------------------------------------------------------- bad flags
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (["--seeds", "-3"], "--seeds -3: seeds are integers from 0 up"),
        (["--seeds", "2,-3-4"], "--seeds -3-4: seeds are integers from 0 up"),
        (["--seeds", "5-2"], "--seeds 5-2: a range runs from its low seed to its high one, e.g. 2-5"),
        (["--seeds", "0-99999999999"], "names 100,000,000,000 seeds, more than the 100,000 tasks a sweep may hold"),
        (["--policies", "fifo,sjf", "--seeds", "0-49999,40000-50000"], "the sweep holds 100,002 tasks"),
        (["--out", "/proc/loangym-x"], "--out /proc/loangym-x: cannot create or write the results folder there"),
        (["--out", "FILE/sub"], "/sub: cannot create or write the results folder there (Not a directory)"),
    ],
)
def test_bad_seeds_and_out_exit_2_with_one_sentence_and_write_nothing(case, expected, tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("keep", encoding="utf-8")
    case = [a.replace("FILE", str(file)) for a in case]
    out = ["--out", str(tmp_path / "out")] if "--out" not in case else []
    assert evaluate.main([*case, *out]) == 2
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("error:") and expected in text and "Traceback" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"] and file.read_text(encoding="utf-8") == "keep"
    assert not Path("/proc/loangym-x").exists()


def test_overlapping_seed_ranges_count_once_toward_the_cap():
    assert len(ev.parse_seeds(f"0-{ev.MAX_TASKS - 1},0-9")) == ev.MAX_TASKS
    assert ev.parse_seeds("3-5, 1 ,4") == [3, 4, 5, 1]
    with pytest.raises(ConfigError, match=f"names {ev.MAX_TASKS + 1:,} seeds"):
        ev.parse_seeds(f"0-{ev.MAX_TASKS - 1},{ev.MAX_TASKS}")
