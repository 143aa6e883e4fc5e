"""Every shell command of the README runs as written.

The commands are those of the README's ``bash`` blocks and its inline code spans that begin with
a program (``.venv/bin/...``, ``python``, ``make``, ``tensorboard``), but for the "Add a policy"
and "Add a scenario" sections, whose commands need the example file saved first
(tests/test_readme_examples.py runs them). Each runs by bash, as written, in a fresh copy of the
repository whose ``.venv`` is this interpreter's environment (``.venv/bin`` first on the PATH,
as in an activated venv), with ``LOANGYM_SMOKE=1`` (agents/smoke.py: at most 2 seeds, 30 jobs an
episode, 2 workers, training budgets / 1000), and must exit 0 without a traceback, say on stderr
that it ran at smoke sizes, print what :data:`EXPECT` says its program prints, and write every
file its ``--out``, ``--json``, ``--markdown`` and ``--figure`` name.

* Two inputs the README leaves to the user are made here: ``runs/default__dual__0__20261129-120000``
  is the folder of the README's own ``train.py`` run, renamed (the commands that name it run after
  that one, in one copy), and ``my_cluster.csv`` holds the first jobs of the shipped ITP trace.
* The ``make`` targets are checked by ``make -n``: each must print exactly its recipe of
  :data:`RECIPES`. A recipe line that is itself a README command (``make run`` trains by
  ``.venv/bin/python train.py``) is checked as that command. A target with other lines runs as
  written (``make bench``) or, where one of its lines is in :data:`EXEMPT` (which says why it
  cannot run here), its other lines run one by one (``make lint``'s ruff).
* The setup recipe (``python3 -m venv``, ``pip install``) is not run: it needs the network, and
  ``.venv/.installed`` is fresh in the copy, so that no target sets anything up. It is what made
  the environment this test runs in.
* ``tensorboard --logdir runs`` is started on the trained run; it must serve the run's two agents
  (``/data/runs``) before it is stopped.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from readme_blocks import EXAMPLES, blocks, copy_repo, environ, inline_commands, run, sections, shell_lines

SMOKE = {"LOANGYM_SMOKE": "1"}
SMOKE_LINE = "LOANGYM_SMOKE=1: smoke sizes"
RUN_FOLDER = "runs/default__dual__0__20261129-120000"
TRACE = "my_cluster.csv"
TRACE_JOBS = 60

RECIPES = {
    "make run": [".venv/bin/python train.py"],
    "make test": [".venv/bin/python -m pytest -n 2"],
    "make lint": [
        ".venv/bin/python -m ruff check .",
        ".venv/bin/python -m ruff format --check .",
        ".venv/bin/python -m mypy envs heuristics agents evaluate.py demos.py train.py",
    ],
    "make bench": [".venv/bin/python benchmarks/sim_speed.py"],
}
"""what ``make -n TARGET`` prints, once set up"""

EXEMPT = {
    ".venv/bin/python -m pytest -n 2": "make test runs the whole suite, this test among it",
    ".venv/bin/python -m mypy envs heuristics agents evaluate.py demos.py train.py": (
        "mypy over the whole tree from a cold cache takes minutes, more than this test may add to "
        "make test; make lint runs it"
    ),
}
"""recipe lines not run here, and why (no README command is exempt)"""

EXPECT = [
    (r"train\.py .*--seeds", r"mean ± 95% CI"),
    (r"train\.py", r"\d+ steps trained; best agent avg JCT [\d,]+ s"),
    (r"evaluate\.py --list-settings", r"--set keys of scenario"),
    (r"evaluate\.py --list\b", r"(?m)^policies: .*\n(.*\n)*scenarios: "),
    (r"evaluate\.py .*--out", r"avg JCT s[\s\S]*wrote \S+/results\.json"),
    (r"demos\.py", r"wrote \S+\.npz"),
    (r"suite\.py", r"(?m)^### \S+: "),
    (r"headroom\.py", r"placement = oracle-\S*speed"),
    (r"reproduce\.py", r"Aryl"),
    (r"estimate_error\.py", r"avg JCT \(s\) on loaning"),
    (r"shockwave_fairness\.py", r"(?m)^dynamic.*seeds"),
    (r"^make bench$", r"jobs/s"),
]
"""(command pattern, what its output must hold): the first pattern a command matches applies"""

OUTPUT_FLAGS = ("--out", "--json", "--markdown", "--figure")


def key(line: str) -> str:
    """A command without its comment and spacing, its programs named by their path in the venv
    (``python`` on the PATH is ``.venv/bin/python``): two spellings of one command are one."""
    words = shlex.split(line, comments=True)
    if words[0] in ("python", "tensorboard"):
        words[0] = f".venv/bin/{words[0]}"
    return " ".join(words)


def readme_commands() -> dict[str, str]:
    """Every command of the README but for the examples' sections: key -> the command as written
    (its first spelling)."""
    out: dict[str, str] = {}
    for title, body in sections():
        if title in EXAMPLES:
            continue
        lines = [ln for b in blocks(body, "bash") for ln in shell_lines(b)] + inline_commands(body)
        for line in lines:
            out.setdefault(key(line), line)
    return out


COMMANDS = readme_commands()
TRAIN = key(".venv/bin/python train.py")
TENSORBOARD = key("tensorboard --logdir runs")
WORKFLOW = [k for k in COMMANDS if RUN_FOLDER in k]
"""the commands that need the trained run folder: run after TRAIN, in the README's order"""
MAKE = [k for k in COMMANDS if k.startswith("make ")]
ALONE = [k for k in COMMANDS if k not in {TRAIN, TENSORBOARD, *WORKFLOW, *MAKE}]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    copy = copy_repo(tmp_path)
    trace = (copy / "envs/sim/data/traces/itp_cluster04_2000.csv").read_text(encoding="utf-8").splitlines()
    (copy / TRACE).write_text("\n".join(trace[: TRACE_JOBS + 1]) + "\n", encoding="utf-8")
    return copy


def check(line: str, repo: Path) -> str:
    """Runs README command ``line`` in ``repo`` at smoke sizes and checks it; its stdout."""
    start = time.time()
    done = run(line, repo, SMOKE)
    said = f"{line}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    assert done.returncode == 0, said
    assert "Traceback" not in done.stdout + done.stderr, said
    words = shlex.split(key(line))
    listing = any(w.startswith("--list") for w in words)
    assert (SMOKE_LINE in done.stderr) != listing, said  # every run with sizes shrank them
    pattern = next((want for cmd, want in EXPECT if re.search(cmd, key(line))), None)
    assert pattern is not None, f"no EXPECT entry for {line}"
    assert re.search(pattern, done.stdout), said
    for flag, value in itertools.pairwise(words):
        if flag in OUTPUT_FLAGS:
            path = repo / value
            files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
            assert files and all(p.stat().st_mtime >= start - 1 for p in files), f"{flag} {value}: {said}"
    return done.stdout


def test_every_command_is_checked_and_the_exemptions_are_few():
    assert TRAIN in COMMANDS and TENSORBOARD in COMMANDS and len(WORKFLOW) >= 3
    assert set(MAKE) <= set(RECIPES), set(MAKE) - set(RECIPES)
    assert set(EXEMPT) <= {ln for r in RECIPES.values() for ln in r} and len(EXEMPT) <= 2
    assert not set(EXEMPT) & set(COMMANDS)  # no README command is exempt
    for k in ALONE:  # every command has its expected output
        assert any(re.search(cmd, k) for cmd, _ in EXPECT), k
    assert len(COMMANDS) == 1 + 1 + len(WORKFLOW) + len(MAKE) + len(ALONE)


@pytest.mark.parametrize("target", MAKE)
def test_a_make_target_runs_its_recipe(target: str, repo: Path):
    dry = run(f"make -n {target.removeprefix('make ')}", repo)
    assert dry.returncode == 0, dry.stderr
    recipe = [ln.strip() for ln in dry.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    assert recipe == RECIPES[target]
    rest = [ln for ln in recipe if key(ln) not in COMMANDS]  # those are checked as README commands
    if rest and not set(rest) & set(EXEMPT):
        check(target, repo)  # the target itself, as written
        return
    for line in rest:
        if line not in EXEMPT:  # a linter: its exit status is all it says
            done = run(line, repo)
            assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("command", ALONE, ids=[re.sub(r"[^\w.=,/-]+", "_", k)[:90] for k in ALONE])
def test_a_readme_command_runs_as_written(command: str, repo: Path):
    check(COMMANDS[command], repo)


def test_the_training_workflow_runs_as_written(repo: Path):
    """train.py, then the commands that name its run folder, then TensorBoard on it."""
    check(COMMANDS[TRAIN], repo)
    (made,) = (repo / "runs").iterdir()
    made.rename(repo / RUN_FOLDER)
    for k in WORKFLOW:
        out = check(COMMANDS[k], repo)
        if "--resume" in k and "--total-steps" in k:
            assert re.search(r"budget \d+ -> \d+ steps", out), out
    state = json.loads((repo / RUN_FOLDER / "state.json").read_text(encoding="utf-8"))
    assert state["steps"] == 80  # --total-steps 80000 at smoke sizes
    serve(COMMANDS[TENSORBOARD], repo)


def serve(line: str, repo: Path, watchdog: float = 120) -> None:
    """Starts TensorBoard as written, asks it for its runs, and stops it."""
    p = subprocess.Popen(
        ["bash", "-c", f"exec {line}"],
        cwd=repo,
        env=environ(repo),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert p.stderr is not None
        url, said, deadline = None, [], time.monotonic() + watchdog
        while url is None and time.monotonic() < deadline:
            text = p.stderr.readline()
            if not text:
                break
            said.append(text)
            m = re.search(r"at (http://\S+/) ", text)
            url = m[1] if m else None
        assert url, "".join(said)
        with urllib.request.urlopen(url + "data/runs", timeout=60) as r:
            served = json.loads(r.read())
        name = Path(RUN_FOLDER).name
        assert {f"{name}/tb/ordering", f"{name}/tb/placement"} <= set(served), served
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)


@pytest.mark.parametrize("value", [None, "", "0"])
def test_without_smoke_every_size_is_the_commands_own(value: str | None, monkeypatch: pytest.MonkeyPatch):
    from agents import smoke
    from agents.dual import TrainConfig

    if value is None:
        monkeypatch.delenv(smoke.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(smoke.VARIABLE, value)
    config = TrainConfig()
    assert smoke.train_config(config) is config
    assert smoke.seeds(range(5)) == [0, 1, 2, 3, 4] and smoke.sets({"a": "1"}) == {"a": "1"}
    assert smoke.count(8, 2) == 8 and smoke.jobs(None) is None and smoke.steps(80_000) == 80_000


def test_smoke_sizes_shrink_what_the_readme_says(monkeypatch: pytest.MonkeyPatch):
    from agents import smoke
    from agents.dual import TrainConfig

    monkeypatch.setenv(smoke.VARIABLE, "1")
    assert smoke.seeds(range(200_000, 200_040)) == [200_000, 200_001]
    assert (
        smoke.sets({}) == {"workload.num_jobs": "30"}
        and smoke.sets({"workload.num_jobs": "20"})["workload.num_jobs"] == "20"
    )
    assert smoke.count(8, smoke.WORKERS) == 2 and smoke.jobs(None) == 30 and smoke.jobs(2000) == 30
    assert smoke.steps(80_000) == 80 and smoke.steps(5) == 1
    c = smoke.train_config(TrainConfig(total_steps=200_000, rounds=4))
    assert (c.total_steps, c.eval_every, c.rounds, c.eval_seeds) == (200, 10, 4, (100_000,))
    assert (c.n_steps, c.batch_size, c.demo_episodes, c.bc_epochs) == (32, 32, 1, 1)
    assert c.overrides == {"workload.num_jobs": "30"}
