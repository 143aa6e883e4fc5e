"""Progress of train.py in every setting (issue 19): on a terminal a rich progress bar of the
steps, and in a terminal or not one line per evaluation; the evaluation interval is a flag whose
help gives its default. (Outside a terminal and with ``--seeds``, here or on Ray:
tests/test_train_workflow.py.)

The terminal is a real pseudo-terminal around a real train.py on a tiny config."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from test_train_robust import TINY

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(args: list[str], watchdog: float = 600) -> tuple[int, str]:
    """train.py with its stdout and stderr on a pseudo-terminal: its exit status and all it wrote
    there (terminal control sequences and carriage returns removed)."""
    master, slave = os.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("LOANGYM_TEST_PAUSE_AT", "NO_COLOR")}
    env.update(TERM="xterm-256color", COLUMNS="120", LINES="40")
    p = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    timer = threading.Timer(watchdog, p.kill)
    timer.start()
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError as e:  # EIO: the terminal's other side is closed (the process is done)
                if e.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            chunks.append(data)
        code = p.wait(timeout=60)
    finally:
        timer.cancel()
        os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    return code, ANSI.sub("", text).replace("\r", "\n")


def test_on_a_terminal_a_progress_bar_counts_the_steps_beside_the_evaluation_lines(tmp_path: Path):
    tiny = [a if a != "384" else "128" for a in TINY]
    out = tmp_path / "runs"
    code, text = on_a_terminal([*tiny, "--no-bc", "--out", str(out), "--demos", str(tmp_path / "demos")])
    assert code == 0, text[-3000:]
    # the bar: its label, its bar, steps done of the planned 128, moving on
    bars = [m for line in text.splitlines() if (m := re.match(r"\s*training\s+[━╸╺]+\s+(\d+)/128\b", line))]
    counts = [int(m[1]) for m in bars]
    assert counts and counts == sorted(counts) and len(set(counts)) >= 2, counts
    # the evaluation lines, in the terminal too: at 0, at the ordering phase's end (102) and at 128
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert [ln.split("/")[0] for ln in lines if re.match(r"\d+/128 steps", ln)] == ["0", "102", "128"], lines
    assert any(ln.startswith("128/128 steps, ") and "steps/s; eval: agent avg JCT" in ln for ln in lines)


def test_the_evaluation_interval_is_a_flag_whose_help_gives_its_default():
    from agents.dual import TrainConfig

    done = subprocess.run([sys.executable, "train.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    entry = text[text.rindex("--eval-every EVAL_EVERY") :][:200]  # its entry, after the usage line
    assert f"(default: {TrainConfig().eval_every:,})" in entry, entry
