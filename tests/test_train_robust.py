"""train.py trusts no input and loses no work: every TrainConfig field has a rule, bad settings and
corrupt run folders are one sentence with exit 2 and nothing written, each phase trains exactly
its steps, and real signals (SIGINT, SIGTERM, SIGKILL, mid-save included) leave a run folder that
``--resume`` continues to the same phases, steps, clonings, evaluation points and best checkpoint.

The kill tests stop a real train.py at named points with the test hook LOANGYM_TEST_PAUSE_AT
(agents/rundir.py: pause_point); the waits are watchdogs, not timed assertions."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import train
from agents import rundir
from agents.dual import RULES, TrainConfig
from envs.core import Components
from envs.sim.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "--total-steps",
    "384",
    "--rounds",
    "1",
    "--n-envs",
    "2",
    *("--set", "n_steps=32", "--set", "batch_size=32", "--set", "workload.synthetic.num_jobs=30"),
    *("--set", "demo_episodes=1", "--set", "bc_epochs=1", "--set", "eval_seeds=100000"),
    *("--set", "baselines=fifo", "--set", "eval_every=128"),
]
# 384 steps over 2 envs, 80% ordering: 308 ordering steps (4 rollouts of 64 and one of 52) and 76
# placement steps (64 + 12); evaluations at 0, every 128 steps and at the end of each phase
PHASES = [(0, "ordering", 308), (0, "placement", 76)]
EVALS = [0, 128, 256, 308, 384]


# ---------------------------------------------------------------------------------------------- helpers
def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` -> SHA-1 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def state(run: Path) -> dict:
    return json.loads((run / "state.json").read_text(encoding="utf-8"))


def trained_steps(checkpoint: Path) -> int:
    """num_timesteps that SB3 saved in a checkpoint: the env steps its agent was trained on."""
    with zipfile.ZipFile(io.BytesIO(checkpoint.read_bytes())) as z:
        return int(json.loads(z.read("data"))["num_timesteps"])


def hidden(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").glob(".*"))


def assert_consistent(run: Path) -> dict:
    """The state names exactly the committed checkpoints, each file holding what it names."""
    s = state(run)
    files = rundir.checkpoint_files(run)
    assert set(files) == set(s["checkpoints"])
    for name, sha in s["checkpoints"].items():
        assert hashlib.sha1(files[name].read_bytes()).hexdigest() == sha, name
    return s


class Train:
    """One train.py subprocess, stopped (or not) at a pause point of the test hook."""

    def __init__(self, args: list[str], log: Path, pause: str = "") -> None:
        self.out, self.err = log.with_suffix(".out"), log.with_suffix(".err")
        env = {k: v for k, v in os.environ.items() if k != rundir.PAUSE_ENV}
        if pause:
            env[rundir.PAUSE_ENV] = pause
        with self.out.open("w") as o, self.err.open("w") as e:
            self.proc = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=o, stderr=e, env=env)

    def wait_paused(self, watchdog: float = 300) -> None:
        deadline = time.monotonic() + watchdog
        while "paused at" not in self.err.read_text(errors="replace"):
            if self.proc.poll() is not None:
                pytest.fail(f"train.py exited {self.proc.returncode} before its pause: {self.text()[-2000:]}")
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail("watchdog: train.py never reached its pause point")
            time.sleep(0.1)

    def stop(self, sig: int) -> int:
        self.wait_paused()
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)

    def finish(self) -> int:
        return self.proc.wait(timeout=600)

    def text(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")


def main_exit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """train.main in this process: its exit status and its output as one line."""
    code = train.main(args)
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demos")


@pytest.fixture(scope="module")
def complete(tmp_path_factory: pytest.TempPathFactory, demos: Path) -> Path:
    """A whole tiny run, never stopped."""
    out = tmp_path_factory.mktemp("complete")
    t = Train([*TINY, "--out", str(out / "runs"), "--demos", str(demos)], out / "log")
    assert t.finish() == 0, t.text()[-3000:]
    (run,) = (out / "runs").iterdir()
    return run


# ---------------------------------------------------------------------------------------------- settings
BAD: dict[str, list[object]] = {
    "scenario": ["nope"],
    "overrides": [{"workload.nosuch": "1"}, {"workload.synthetic.num_jobs": 5}],
    "trace": ["/nonexistent/trace.csv"],
    "exp": ["", "a/b", ".hidden"],
    "seed": [-1, 2**32, "0"],
    "total_steps": [0, -5, 1.5],
    "extensions": [((50_000, 384),), ((5, 384),), ((128, 384), (64, 384)), ((-2, 384),), ((128, 0),), ((2,),), (1, 2)],
    "rounds": [0],
    "ordering_share": [-0.1, 1.5, math.nan],
    "n_envs": [0],
    "max_jobs": [0],
    "components": [
        Components("nope", "aryl", "aryl", "aryl"),
        Components("tiresias", "aryl", "aryl", "aryl"),  # not built from components
        Components("aryl", "aryl", "nope", None),
        Components("aryl", "aryl", "aryl", "nope"),
        "aryl",
    ],
    "reward": ["nope"],
    "reward_reference": ["nope", 3],
    "bc": ["yes", 1],
    "experts": [("nope",), ("tiresias",), "sjf", ("oracle-lookahead-nope",)],
    "demo_episodes": [0],
    "demo_seed": [-1],
    "bc_epochs": [0],
    "train_seeds": [(5, 5), (-1, 3), (3,)],
    "eval_seeds": [(), (-1,), (1.5,)],
    "eval_every": [0],
    "baselines": [("nope",)],
    "learning_rate": [0.0, -1.0, math.inf],
    "placement_lr_scale": [0.0],
    "n_steps": [0],
    "batch_size": [0, 1],
    "n_epochs": [0],
    "gamma": [0.0, 2.0],
    "gae_lambda": [0.0, 1.5],
    "ent_coef": [-0.1],
    "clip_range": [0.0],
    "hidden": [0],
    "activation": ["sigmoid"],
    "threads": [0],
}


def test_every_field_of_trainconfig_has_a_rule_and_a_bad_value_here():
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(RULES) == fields
    assert set(BAD) == fields, "a TrainConfig field without a bad-value case: add it to BAD"


@pytest.mark.parametrize(("name", "value"), [(k, v) for k, vs in BAD.items() for v in vs])
def test_a_bad_value_of_any_field_is_one_sentence_naming_it(name, value):
    TrainConfig().validate()  # the defaults are valid
    with pytest.raises(ConfigError) as e:
        dataclasses.replace(TrainConfig(), **{name: value}).validate()
    text = str(e.value)
    assert text.startswith(f"setting '{name}'") and text.endswith(".") and "\n" not in text


def test_settings_that_are_wrong_only_together_are_refused():
    with pytest.raises(ConfigError, match="times setting 'n_envs' must be at least 2"):
        TrainConfig(n_steps=1, n_envs=1).validate()
    with pytest.raises(ConfigError, match="must name an expert"):
        TrainConfig(experts=()).validate()
    TrainConfig(experts=(), bc=False).validate()


def test_each_phase_is_exact_and_the_default_split_is_unchanged():
    assert TrainConfig(total_steps=384, rounds=1, n_envs=2).phase_steps() == PHASES
    default = TrainConfig().phase_steps()  # 2 rounds of 20,000 steps, 80% of them ordering
    assert default == [(r, a, n) for r in (0, 1) for a, n in (("ordering", 16_000), ("placement", 4_000))]
    for total, rounds, n_envs in ((1024, 2, 4), (1000, 3, 4), (7, 3, 4), (40_001, 5, 3)):
        c = TrainConfig(total_steps=total, rounds=rounds, n_envs=n_envs)
        steps = [p[2] for p in c.phase_steps()]
        assert all(s % n_envs == 0 and s > 0 for s in steps)
        assert c.planned_steps() == sum(steps) == max(n_envs, n_envs * round(total / n_envs))


def test_a_budget_change_keeps_the_phases_done_and_plans_the_rest_afresh():
    # finished at 384, extended to 768: 384 more in one round, 80% ordering (154 vector steps)
    c = TrainConfig(total_steps=768, rounds=1, n_envs=2, extensions=((384, 384),))
    assert c.phase_steps() == [*PHASES, (1, "ordering", 308), (1, "placement", 76)]
    # stopped at 128 inside the first ordering phase, then given 640 steps in all: the phase ends at
    # 128, and 512 more follow in two rounds of 256 (80%: 102.4 vector steps of ordering, so 204
    # steps, then 52)
    c = TrainConfig(total_steps=640, rounds=2, n_envs=2, extensions=((128, 384),))
    plan = [
        (0, "ordering", 128),
        (1, "ordering", 204),
        (1, "placement", 52),
        (2, "ordering", 204),
        (2, "placement", 52),
    ]
    assert c.phase_steps() == plan and c.planned_steps() == 640
    # a budget cut to the steps done: nothing more to plan; extended twice: each change cuts the plan
    assert TrainConfig(total_steps=128, rounds=1, n_envs=2, extensions=((128, 384),)).phase_steps() == plan[:1]
    twice = TrainConfig(total_steps=800, rounds=1, n_envs=2, extensions=((128, 384), (200, 640)))
    assert twice.phase_steps()[:2] == [(0, "ordering", 128), (1, "ordering", 72)]
    assert twice.planned_steps() == 800
    TrainConfig(total_steps=640, extensions=((128, 384),), n_envs=2).validate()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "--threads must be at least 1, got 0."),
        (["--set", "learning_rate=-1"], "--set learning_rate must be above 0, got -1.0."),
        (["--set", "gamma=2"], "--set gamma must be in (0, 1], got 2.0."),
        (["--set", "batch_size=0"], "--set batch_size must be at least 2, got 0."),
        (["--set", "n_steps=0"], "--set n_steps must be at least 1, got 0."),
        (["--total-steps", "0"], "--total-steps must be at least 1, got 0."),
        (["--out", "FILE"], "--out FILE: FILE is a file, not a folder."),
        (["--out", "FILE/runs"], "--out FILE/runs: FILE is a file, not a folder."),
        (["--demos", "FILE"], "--demos FILE: FILE is a file, not a folder."),
    ],
)
def test_bad_settings_are_refused_before_any_work_and_create_no_run_folder(args, message, tmp_path, capsys):
    file = tmp_path / "a_file"
    file.write_text("keep me\n")
    args = [a.replace("FILE", str(file)) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "runs")]
    if "--demos" not in args:
        args += ["--demos", str(tmp_path / "demos")]
    code, text = main_exit(args, capsys)
    assert code == 2 and text == "error: " + message.replace("FILE", str(file))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and file.read_text() == "keep me\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "5"], "--seed 5 contradicts RUN/config.yaml (seed: 0)"),
        (["--scenario", "loaning"], "--scenario loaning contradicts RUN/config.yaml (scenario: default)"),
        (["--experts", "aryl"], "--experts aryl contradicts RUN/config.yaml (experts: sjf)"),
        (["--no-bc"], "--no-bc contradicts RUN/config.yaml (bc: true)"),
        (["--rounds", "2"], "--rounds 2 contradicts RUN/config.yaml (rounds: 1)"),
        (["--set", "gamma=0.9"], "--set gamma=0.9 contradicts RUN/config.yaml (gamma: 0.999)"),
        (
            ["--set", "workload.synthetic.num_jobs=31"],
            "--set workload.synthetic.num_jobs=31 contradicts RUN/config.yaml (workload.synthetic.num_jobs: 30)",
        ),
        (
            ["--set", "components.reclaim=fifo"],
            "--set components.reclaim=fifo contradicts RUN/config.yaml (components.reclaim: aryl)",
        ),
        (["--total-steps", "100"], "--total-steps 100 is below the 384 steps RUN has trained already."),
        (["--total-steps", "0"], "--total-steps 0 is below the 384 steps RUN has trained already."),
        (["--eval-every", "0"], "--eval-every must be at least 1, got 0."),
    ],
)
def test_resume_refuses_flags_that_contradict_the_run_and_changes_nothing(args, message, complete, capsys):
    before = snapshot(complete)
    code, text = main_exit(["--resume", str(complete), *args], capsys)
    message = message.replace("RUN", str(complete))
    assert code == 2 and text.startswith("error: ") and message in text, text
    if "contradicts" in message:
        assert text.endswith(
            "a resumed run keeps its settings, only --total-steps, --eval-every, --threads may change."
        )
    assert snapshot(complete) == before


# ---------------------------------------------------------------------------------------------- a whole run
def test_a_run_trains_exactly_its_steps_and_commits_them(complete):
    s = assert_consistent(complete)
    assert (s["version"], s["phase"], s["in_phase"], s["steps"]) == (3, 2, 0, 384)
    assert [e["steps"] for e in s["evals"]] == EVALS
    assert set(s["bc"]) == {"ordering", "placement"}
    ck = complete / "checkpoints"
    assert trained_steps(ck / "ordering_latest.zip") == 308 and trained_steps(ck / "placement_latest.zip") == 76
    finished = [e["agent"]["avg_jct_s"] for e in s["evals"] if e["agent"]["jobs_unfinished"] == 0]
    assert s["best"] == min(finished)
    assert sorted(p.name for p in ck.iterdir()) == sorted(rundir.CHECKPOINT_NAMES) and hidden(complete) == []
    assert not list(complete.glob(".*"))


# ---------------------------------------------------------------------------------------------- corrupt folders
def _truncate(run: Path) -> None:
    p = run / "checkpoints" / "ordering_latest.zip"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _junk_that_matches(run: Path) -> None:
    """A checkpoint that is what state.json names, yet no SB3 model."""
    (run / "checkpoints" / "placement_latest.zip").write_bytes(b"PK junk")
    doc = state(run)
    doc["checkpoints"]["placement_latest.zip"] = hashlib.sha1(b"PK junk").hexdigest()
    (run / "state.json").write_text(json.dumps(doc))


def _edit_state(**changes: object):
    def edit(run: Path) -> None:
        (run / "state.json").write_text(json.dumps(state(run) | changes))

    return edit


def _legacy(run: Path) -> None:
    doc = state(run)
    for k in ("version", "generation", "checkpoints", "staged"):
        doc.pop(k)
    (run / "state.json").write_text(json.dumps(doc))


def _config(old: str, new: str):
    def edit(run: Path) -> None:
        text = (run / "config.yaml").read_text()
        assert old in text
        (run / "config.yaml").write_text(text.replace(old, new))

    return edit


CORRUPT = {
    "truncated checkpoint": (_truncate, "checkpoints/ordering_latest.zip: not the checkpoint state.json names"),
    "empty checkpoint": (
        lambda r: (r / "checkpoints" / "placement_best.zip").write_bytes(b""),
        "checkpoints/placement_best.zip: not the checkpoint state.json names",
    ),
    "checkpoint that does not load": (
        _junk_that_matches,
        "checkpoints/placement_latest.zip: does not load as the placement agent of config.yaml",
    ),
    "missing checkpoint": (
        lambda r: (r / "checkpoints" / "ordering_best.zip").unlink(),
        "checkpoints/ordering_best.zip: named by state.json, but missing.",
    ),
    "empty state.json": (lambda r: (r / "state.json").write_text(""), "state.json: is empty."),
    "corrupt state.json": (lambda r: (r / "state.json").write_text('{"phase": 2, "ste'), "state.json: not valid JSON"),
    "state.json not an object": (
        lambda r: (r / "state.json").write_text("[1, 2]"),
        "state.json: expected a JSON object.",
    ),
    "missing state.json": (lambda r: (r / "state.json").unlink(), "state.json: missing"),
    "state.json from an older train.py": (_legacy, "state.json: written by an older train.py"),
    "state.json of bad type": (_edit_state(steps="384"), "'steps' must be a count"),
    "state.json that does not add up": (_edit_state(steps=380), "380 steps done do not add up"),
    "state.json past the plan": (_edit_state(phase=3), "says phase 3 (+0 steps), but config.yaml plans 2 phases."),
    "state.json with no best checkpoint for its best": (
        lambda r: _edit_state(
            checkpoints={k: v for k, v in state(r)["checkpoints"].items() if "best" not in k},
            staged={k: v for k, v in state(r)["staged"].items() if "best" not in k},
        )(r),
        "'best' and the best checkpoints it names do not go together.",
    ),
    "state.json with a cloned agent but no checkpoint": (
        lambda r: _edit_state(checkpoints={}, best=None, phase=0, steps=0, evals=[], bc={"ordering": {}}, staged={})(r),
        "the ordering agent was trained, but no checkpoint of it is named.",
    ),
    "config.yaml with a bad value": (
        _config("gamma: 0.999", "gamma: 2"),
        "config.yaml: setting 'gamma' must be in (0, 1], got 2.",
    ),
    "config.yaml with a bad type": (
        _config("n_envs: 2", "n_envs: two"),
        "config.yaml: setting 'n_envs' expects an integer",
    ),
    "config.yaml not YAML": (lambda r: (r / "config.yaml").write_text("a: [1,\n"), "config.yaml: not valid YAML"),
    "config.yaml with another plan": (_config("total_steps: 384", "total_steps: 512"), "384 steps done do not add up"),
    "corrupt layout.json": (lambda r: (r / "layout.json").write_text("{"), "layout.json: not valid JSON"),
    "layout.json of other agents": (
        lambda r: (r / "layout.json").write_text(
            json.dumps(json.loads((r / "layout.json").read_text()) | {"max_jobs": 8})
        ),
        "layout.json: says max_jobs 8 (config.yaml builds 32); this folder cannot be resumed.",
    ),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_resume_refuses_a_corrupt_or_inconsistent_folder_and_leaves_it_unchanged(case, complete, tmp_path, capsys):
    corrupt, message = CORRUPT[case]
    run = tmp_path / "run"
    shutil.copytree(complete, run)
    corrupt(run)
    before = snapshot(run)
    code, text = main_exit(["--resume", str(run)], capsys)
    assert code == 2 and text.startswith(f"error: {run}") and message in text, text
    assert "Traceback" not in text and text.count(". ") == 0  # one sentence
    assert snapshot(run) == before


def test_resume_writes_a_deleted_layout_json_again(complete, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(complete, run)
    layout = (run / "layout.json").read_text()
    (run / "layout.json").unlink()
    code, text = main_exit(["--resume", str(run)], capsys)
    assert code == 0 and "layout.json was missing: written again from config.yaml" in text
    assert (run / "layout.json").read_text() == layout
    assert state(run) == state(complete)  # a finished run: nothing more to train or evaluate


# ---------------------------------------------------------------------------------------------- real signals
def test_signals_and_kills_anywhere_leave_a_run_that_resumes_to_the_same_training(complete, demos, tmp_path):
    out = tmp_path / "runs"
    log = tmp_path / "log"
    step = iter(range(100))

    def resume(pause: str = "") -> Train:
        return Train(["--resume", str(run)], log.with_name(f"log{next(step)}"), pause)

    # SIGTERM in the ordering agent's cloning of a new run: saved as created, nothing cloned
    t = Train([*TINY, "--out", str(out), "--demos", str(demos)], log, "bc:ordering")
    assert t.stop(signal.SIGTERM) == 143
    (run,) = out.iterdir()
    assert f"continue with --resume {run}" in " ".join(t.text().split())
    s = assert_consistent(run)
    assert (s["steps"], s["bc"], s["evals"], s["checkpoints"]) == (0, {}, [], {})
    from test_train_workflow import check_hparams

    check_hparams(run, 384)  # TensorBoard shows its settings from the start

    # SIGINT in the placement agent's cloning: the ordering agent's is committed, not the other
    t = resume("bc:placement")
    assert t.stop(signal.SIGINT) == 130 and "BC ordering" in t.text()
    s = assert_consistent(run)
    assert (s["steps"], list(s["bc"]), list(s["checkpoints"])) == (0, ["ordering"], ["ordering_latest.zip"])

    # SIGKILL mid-save, checkpoints written but state.json not replaced: the previous commit holds
    # (saves since this resume: placement cloning, evaluation at 0, rollout to 64, rollout to 128)
    t = resume("save:staged@4")
    assert t.stop(signal.SIGKILL) == -signal.SIGKILL
    assert "BC placement" in t.text() and "BC ordering" not in t.text()
    s = assert_consistent(run)
    assert (s["steps"], s["in_phase"], [e["steps"] for e in s["evals"]]) == (64, 64, [0])
    assert hidden(run) == [f".ordering_latest.g{s['generation'] + 1}.zip"]  # what the killed save wrote
    latest_64 = s["checkpoints"]["ordering_latest.zip"]

    # SIGKILL mid-save, state.json replaced but its checkpoint not renamed: the new commit holds
    t = resume("save:committed@1")
    assert t.stop(signal.SIGKILL) == -signal.SIGKILL
    s = assert_consistent(run)
    assert (s["steps"], [e["steps"] for e in s["evals"]]) == (128, [0])
    files = rundir.checkpoint_files(run)
    assert files["ordering_latest.zip"].name == f".ordering_latest.g{s['generation']}.zip"
    plain = hashlib.sha1((run / "checkpoints" / "ordering_latest.zip").read_bytes()).hexdigest()
    assert plain == latest_64 != s["checkpoints"]["ordering_latest.zip"]

    # SIGTERM in the evaluation due at 128 steps: lost, so done again on resume
    t = resume("eval")
    assert t.stop(signal.SIGTERM) == 143
    s = assert_consistent(run)
    assert (s["steps"], [e["steps"] for e in s["evals"]]) == (128, [0]) and hidden(run) == []

    # SIGINT inside a rollout: the evaluation at 128 is committed, the rollout's steps are not
    t = resume("rollout@5")
    assert t.stop(signal.SIGINT) == 130
    s = assert_consistent(run)
    assert (s["steps"], [e["steps"] for e in s["evals"]]) == (128, [0, 128])

    # to the end: the phases, steps, clonings and evaluation points of the run never stopped
    t = resume()
    assert t.finish() == 0, t.text()[-3000:]
    assert "BC " not in t.text()
    s, ref = assert_consistent(run), state(complete)
    for k in ("version", "phase", "in_phase", "steps"):
        assert s[k] == ref[k], k
    assert [e["steps"] for e in s["evals"]] == EVALS and set(s["bc"]) == {"ordering", "placement"}
    assert s["evals"][0] == ref["evals"][0]  # before any PPO step: the same cloned agents, the same figures
    ck = run / "checkpoints"
    assert trained_steps(ck / "ordering_latest.zip") == 308 and trained_steps(ck / "placement_latest.zip") == 76
    finished = [e["agent"]["avg_jct_s"] for e in s["evals"] if e["agent"]["jobs_unfinished"] == 0]
    assert s["best"] == min(finished) and hidden(run) == []
    command = (run / "command.txt").read_text().splitlines()
    assert len(command) == 7 and command[1:] == [f"train.py --resume {run}"] * 6
    check_hparams(run, 384)  # one session after six resumes, with the figures of the last evaluation


def test_an_interrupted_run_resumes_to_a_new_total_from_where_it_stopped(demos, tmp_path):
    out = tmp_path / "runs"
    # the 70th rollout step is inside the third rollout: 128 ordering steps and 2 evaluations committed
    t = Train([*TINY, "--out", str(out), "--demos", str(demos)], tmp_path / "log", "rollout@70")
    assert t.stop(signal.SIGINT) == 130
    (run,) = out.iterdir()
    s = assert_consistent(run)
    assert (s["steps"], s["phase"], [e["steps"] for e in s["evals"]]) == (128, 0, [0, 128])
    from test_train_workflow import check_hparams

    check_hparams(run, 384)  # stopped midway: its settings and the figures of its last evaluation
    # to 200 in all: the ordering phase under way ends at 128; 72 more follow in one round, 80% of
    # its 36 vector steps (28.8, so 29: 58 steps) ordering, then 14 placement
    t = Train(["--resume", str(run), "--total-steps", "200"], tmp_path / "log2")
    assert t.finish() == 0, t.text()[-3000:]
    assert "budget 384 -> 200 steps" in t.text() and "BC " not in t.text()
    s = assert_consistent(run)
    assert (s["steps"], s["phase"], s["in_phase"]) == (200, 3, 0)
    assert [e["steps"] for e in s["evals"]] == [0, 128, 186, 200]
    ck = run / "checkpoints"
    assert trained_steps(ck / "ordering_latest.zip") == 186 and trained_steps(ck / "placement_latest.zip") == 14
    check_hparams(run, 200)
