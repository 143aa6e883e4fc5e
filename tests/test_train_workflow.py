"""The researcher's loop with train.py (issue 19): a run that says how far it got outside a terminal,
TensorBoard files that compare runs (hyper-parameters in the HParams plugin, one global step on
every tag of both agents), ``--resume RUN --total-steps N`` extending a run, and ``--seeds``
training several seeds, here or on a local Ray instance, to the same run folders.

Every test runs the real train.py in a subprocess on a tiny config."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_train_robust import TINY  # the tiny run both files train

ROOT = Path(__file__).resolve().parent.parent

# 384 steps over 2 envs, 80% ordering: ordering 0-308, placement 308-384; evaluations at 0, every
# 128 steps and at each phase's end
ORDERING_END, EVALS = 308, [0, 128, 256, 308, 384]
AGENTS = ("ordering", "placement")


def train(*args: str, watchdog: float = 600) -> subprocess.CompletedProcess[str]:
    """train.py in a subprocess (stdout not a terminal), its output as text."""
    env = {k: v for k, v in os.environ.items() if k != "LOANGYM_TEST_PAUSE_AT"}
    return subprocess.run(
        [sys.executable, "train.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=watchdog, env=env
    )


def state(run: Path) -> dict:
    return json.loads((run / "state.json").read_text(encoding="utf-8"))


def trained_steps(checkpoint: Path) -> int:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(checkpoint.read_bytes())) as z:
        return int(json.loads(z.read("data"))["num_timesteps"])


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of a TensorBoard folder -> its (step, value) points, read back."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(folder))
    ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demos")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, demos: Path) -> tuple[Path, str]:
    """A whole tiny run and its output."""
    out = tmp_path_factory.mktemp("finished")
    p = train(*TINY, "--out", str(out), "--demos", str(demos))
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = out.iterdir()
    return run, p.stdout


# ---------------------------------------------------------------------------------------------- progress
def test_outside_a_terminal_each_evaluation_prints_a_progress_line_before_the_table(finished):
    run, text = finished
    lines = text.splitlines()
    bc = max(i for i, line in enumerate(lines) if line.startswith("BC "))
    table = next(i for i, line in enumerate(lines) if "held-out seeds" in line)
    progress = [line for line in lines[bc + 1 : table] if line.strip()]
    agent = [e["agent"]["avg_jct_s"] for e in state(run)["evals"]]
    assert len(progress) == len(EVALS)
    for line, steps, jct in zip(progress, EVALS, agent, strict=True):
        assert line.startswith(f"{steps}/384 steps") and f"agent avg JCT {jct:,.0f} s" in line, line
        assert ("steps/s" in line) == (steps > 0)


# ---------------------------------------------------------------------------------------------- tensorboard
def hparams_sessions(logdir: Path) -> dict[str, tuple[dict[str, object], dict[str, float]]]:
    """What TensorBoard's HParams tab shows for ``logdir`` (as ``tensorboard --logdir`` would
    serve it, through the hparams plugin's own code): each session's run -> (its hyper-parameters,
    its metrics' values)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups

    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    tb = backend_context.Context(base_plugin.TBContext(data_provider=provider, logdir=str(logdir), multiplexer=mux))
    request = api_pb2.ListSessionGroupsRequest(
        start_index=0, slice_size=1000, allowed_statuses=list(api_pb2.Status.values())
    )
    response = list_session_groups.Handler(context.RequestContext(), tb, "", request).run()
    out = {}
    for group in response.session_groups:
        hp = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in group.hparams.items()}
        for session in group.sessions:
            out[session.name] = (hp, {m.name.tag: m.value for m in session.metric_values})
    return out


def hparams_records(run: Path) -> int:
    """Hparams session records in all the run's TensorBoard files (each a session start)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return sum(
        v.tag == "_hparams_/session_start_info"
        for f in (run / "tb").rglob("*tfevents*")
        for e in EventFileLoader(str(f)).Load()
        for v in e.summary.value
    )


def check_hparams(run: Path, total_steps: int) -> dict[str, object]:
    """The HParams tab of ``run``: one session, tb/ordering, with the run's config (its
    ``total_steps``) and the figures of its last evaluation; its hyper-parameters."""
    sessions = hparams_sessions(run.parent)
    assert [s for s in sessions if s.startswith(run.name + "/")] == [f"{run.name}/tb/ordering"], sessions
    assert hparams_records(run) == 1
    hp, metrics = sessions[f"{run.name}/tb/ordering"]
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert hp["total_steps"] == config["total_steps"] == total_steps and hp["seed"] == config["seed"]
    assert hp["eval_every"] == config["eval_every"]
    s = state(run)
    if s["evals"]:
        last = s["evals"][-1]["agent"]
        for k in ("avg_jct_s", "p95_jct_s", "utilization"):
            assert metrics[f"eval/{k}/agent"] == pytest.approx(last[k]), k
    if s["best"] is not None:
        assert metrics["eval/best_avg_jct_s"] == pytest.approx(s["best"])
    return hp


def test_tensorboard_holds_the_hyperparameters_for_the_hparams_tab(finished):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run, _ = finished
    hp = check_hparams(run, 384)
    assert hp["seed"] == 0 and hp["n_steps"] == 32 and hp["reward"] == "jct"
    assert hp["overrides.workload.synthetic.num_jobs"] == "30"
    assert hp["components.placement"] == "aryl-nogroup"
    ea = EventAccumulator(str(run / "tb" / "ordering"))
    ea.Reload()
    content = ea.PluginTagToContent("hparams")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    metrics = {m.name.tag for m in experiment.metric_infos}
    assert {"eval/avg_jct_s/agent", "eval/p95_jct_s/agent", "eval/best_avg_jct_s"} <= metrics
    # the tab shows each metric's latest value: the final evaluation's
    tags = scalars(run / "tb" / "ordering")
    last = state(run)["evals"][-1]["agent"]
    assert tags["eval/avg_jct_s/agent"][-1] == (384, pytest.approx(last["avg_jct_s"]))
    assert tags["eval/best_avg_jct_s"][-1] == (384, pytest.approx(state(run)["best"]))
    assert "| total_steps | 384 |" in ea.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val[0].decode()
    assert len(ea.Tensors("hyperparameters/text_summary")) == 1


def check_global_steps(run: Path, ordering: list[tuple[int, int]], placement: list[tuple[int, int]], evals: list[int]):
    """Every tag of each agent at global steps (both agents' env steps) inside the spans
    (start, end] where that agent trained, with points at the spans' ends; eval/ at ``evals``."""
    for agent, spans in (("ordering", ordering), ("placement", placement)):
        tags = scalars(run / "tb" / agent)
        trained = {
            t: [s for s, _ in pts] for t, pts in tags.items() if t.split("/")[0] in ("rollout", "sched", "train")
        }
        assert {"rollout/ep_rew_mean", "sched/avg_jct_s", "train/loss"} <= set(trained), agent
        for tag, steps in trained.items():
            assert all(any(a < s <= b for a, b in spans) for s in steps), (agent, tag, steps)
        for _, end in spans:
            assert end in trained["train/loss"], (agent, end)
        for tag in [t for t in tags if t.startswith("bc/")]:
            assert [s for s, _ in tags[tag]] == [0]
    evaluated = scalars(run / "tb" / "ordering")
    assert [s for s, _ in evaluated["eval/avg_jct_s/agent"]] == evals


def test_every_tag_of_both_agents_is_at_the_global_step(finished):
    run, _ = finished
    check_global_steps(run, [(0, ORDERING_END)], [(ORDERING_END, 384)], EVALS)


# ---------------------------------------------------------------------------------------------- resume
def test_resume_with_total_steps_extends_a_finished_run(finished, demos, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished[0], run)
    before = state(run)
    # 513 over 2 envs rounds to 512: 128 more steps, one round, 80% ordering (102) then placement (26)
    p = train("--resume", str(run), "--total-steps", "513", "--demos", str(demos))
    assert p.returncode == 0, p.stdout + p.stderr
    text = " ".join(p.stdout.split())
    assert "budget 384 -> 513 steps (recorded in config.yaml): 128 steps to train from the 384 done" in text
    assert "no multiple of --n-envs 2" in text and "training 512 steps" in text
    s = state(run)
    assert (s["steps"], s["phase"], s["in_phase"]) == (512, 4, 0)
    assert [e["steps"] for e in s["evals"]] == [*EVALS, 486, 512]
    assert s["evals"][: len(EVALS)] == before["evals"] and s["bc"] == before["bc"]  # what was done stays
    ck = run / "checkpoints"
    assert trained_steps(ck / "ordering_latest.zip") == 308 + 102
    assert trained_steps(ck / "placement_latest.zip") == 76 + 26
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["total_steps"] == 513 and config["extensions"] == [[384, 384]]
    assert (
        (run / "command.txt").read_text().splitlines()[-1].endswith(f"--resume {run} --total-steps 513 --demos {demos}")
    )
    check_global_steps(run, [(0, ORDERING_END), (384, 486)], [(ORDERING_END, 384), (486, 512)], [*EVALS, 486, 512])
    assert check_hparams(run, 513)["extensions"] == "(384, 384)"  # the new budget, the latest figures
    # the extended run resumes plainly, with nothing left to do
    again = train("--resume", str(run))
    assert again.returncode == 0 and state(run)["steps"] == 512 and len(state(run)["evals"]) == len(EVALS) + 2
    check_hparams(run, 513)


def test_resume_takes_the_settings_a_run_may_change_and_records_them(finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished[0], run)
    # the same values as config.yaml's are no contradiction; --eval-every and --threads may change
    p = train("--resume", str(run), "--seed", "0", "--n-envs", "2", "--eval-every", "64", "--threads", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["eval_every"] == 64 and config["total_steps"] == 384 and config["extensions"] == []
    assert state(run) == state(finished[0])  # finished: nothing to train
    assert check_hparams(run, 384)["eval_every"] == 64


# ---------------------------------------------------------------------------------------------- seeds
def comparable(run: Path) -> dict[str, object]:
    """What a run's folder says that must not depend on where it ran: its config, layout, progress,
    evaluations and clonings, its HParams tab, and the values of its TensorBoard scalars (not
    time/fps, nor the checkpoints' bytes or the folder name, which hold wall-clock times)."""
    s = state(run)
    return {
        "config": (run / "config.yaml").read_text(),
        "layout": (run / "layout.json").read_text(),
        "command": (run / "command.txt").read_text(),
        # as JSON text: a NaN (a cloning's accuracy with no held-out step) equals itself
        "state": json.dumps({k: s[k] for k in ("phase", "in_phase", "steps", "best", "evals", "bc", "generation")}),
        "checkpoints": sorted(s["checkpoints"]),
        "hparams": hparams_sessions(run.parent)[f"{run.name}/tb/ordering"],
        "tb": json.dumps(
            {a: {t: v for t, v in scalars(run / "tb" / a).items() if not t.startswith("time/")} for a in AGENTS},
            sort_keys=True,
        ),
    }


def test_seeds_train_here_and_on_ray_to_the_same_run_folders(demos, tmp_path):
    pytest.importorskip("ray")
    tiny = [a if a != "384" else "256" for a in TINY]
    folders = {}
    for backend in ("local", "ray"):
        out = tmp_path / backend
        p = train(*tiny, "--seeds", "0-1", "--backend", backend, "--out", str(out), "--demos", str(demos))
        assert p.returncode == 0, p.stdout + p.stderr
        runs = sorted(out.iterdir())
        assert [re.sub(r"__\d{8}-\d{6}.*", "", r.name) for r in runs] == ["default__dual__0", "default__dual__1"]
        folders[backend] = runs
        text = " ".join(p.stdout.split())
        assert "mean ± 95% CI" in text
        jct = [state(r)["evals"][-1]["agent"]["avg_jct_s"] for r in runs]
        for seed, r, j in zip((0, 1), runs, jct, strict=True):
            assert f"seed {seed}: {r}: 256 steps, agent avg JCT {j:,.0f} s" in text
        mean = sum(jct) / 2
        assert f"{mean:,.0f} ±" in text
        for seed, r in enumerate(runs):  # here and on Ray, each evaluation prints its seed's progress line
            check_seed_progress(p.stdout, seed, r, 256)
    for local, ray in zip(folders["local"], folders["ray"], strict=True):
        a, b = comparable(local), comparable(ray)
        assert a["command"] != b["command"]  # each names its backend and --out
        a.pop("command"), b.pop("command")
        assert a == b, local.name
    assert comparable(folders["local"][0])["state"] != comparable(folders["local"][1])["state"]  # seeds differ


def check_seed_progress(stdout: str, seed: int, run: Path, planned: int) -> None:
    """One progress line of ``seed`` per evaluation of its run (steps, steps/s after the first,
    the agent's avg JCT), in order, all before the line saying the seed is done."""
    lines = [" ".join(line.split()) for line in stdout.splitlines()]
    done = next(i for i, line in enumerate(lines) if line.startswith(f"seed {seed}: {run}:"))
    progress = [(i, line) for i, line in enumerate(lines) if re.match(rf"seed {seed}: [\d,]+/", line)]
    evals = state(run)["evals"]
    assert len(progress) == len(evals) >= 2, lines
    for (i, line), e in zip(progress, evals, strict=True):
        assert i < done and line.startswith(f"seed {seed}: {e['steps']:,}/{planned:,} steps"), line
        assert ("steps/s" in line) == (e["steps"] > 0) and f"agent avg JCT {e['agent']['avg_jct_s']:,.0f} s" in line


@contextlib.contextmanager
def ray_cluster() -> Iterator[str]:
    """A running Ray instance that train.py joins with --address: started by a Python process of
    its own (one CPU), whose Ray processes end with it when its stdin closes. Its address. (Ray
    protects a cluster with a token: the caller sets one, RAY_AUTH_TOKEN, for both processes.)"""
    code = (
        "import sys, ray; ray.init(num_cpus=1, include_dashboard=False); "
        "print(ray.get_runtime_context().gcs_address, flush=True); sys.stdin.read()"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        address = p.stdout.readline().strip()
        assert re.fullmatch(r"[\w.-]+:\d+", address), address
        yield address
    finally:
        assert p.stdin is not None
        p.stdin.close()
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_seeds_on_a_running_ray_cluster_report_their_progress_and_write_their_run(demos, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
    tiny = [a if a != "384" else "128" for a in TINY]
    out = tmp_path / "runs"
    with ray_cluster() as address:
        ray_args = ("--seeds", "0", "--backend", "ray", "--address", address)
        p = train(*tiny, *ray_args, "--out", str(out), "--demos", str(demos))
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = out.iterdir()
    assert state(run)["steps"] == 128 and (run / "checkpoints" / "ordering_latest.zip").is_file()
    check_seed_progress(p.stdout, 0, run, 128)


def test_a_signal_stops_seeds_on_ray_with_each_run_folder_at_its_last_commit(demos, tmp_path):
    pytest.importorskip("ray")
    from agents import rundir

    out = tmp_path / "runs"
    cmd = [sys.executable, "train.py", *TINY, "--seeds", "0", "--backend", "ray", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != rundir.PAUSE_ENV}
    p = subprocess.Popen(
        [*cmd, "--demos", str(demos)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    watchdog = threading.Timer(600, p.kill)
    watchdog.start()
    try:
        assert p.stdout is not None
        said = []
        for line in p.stdout:  # stopped while waiting on the task, once its first evaluation is in
            said.append(line)
            if line.startswith("seed 0: 0/384 steps"):
                p.send_signal(signal.SIGTERM)
                break
        said.append(p.communicate()[0])
    finally:
        watchdog.cancel()
    text = " ".join("".join(said).split())
    assert p.returncode == 143, text
    assert f"stopped by SIGTERM: each run folder under {out} holds its last commit" in text and "Traceback" not in text
    (run,) = out.iterdir()
    s, _ = rundir.read_state(run, rundir.load_config(run))  # a consistent commit: it resumes
    assert s.evals and s.evals[0]["steps"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "0-1", "--seed", "3"], "--seeds trains new runs of each seed it names, so --seed cannot"),
        (["--seeds", "0-1", "--resume", "RUN"], "--seeds trains new runs of each seed it names, so --resume cannot"),
        (["--seeds", "4-1"], "--seeds expects seeds such as 0-4 or 0,3,7-8, got '4-1'."),
        (["--seeds", "0,x"], "--seeds expects seeds such as 0-4 or 0,3,7-8, got '0,x'."),
        (["--seeds", "0,0-2"], "--seeds names a seed twice: '0,0-2'."),
        (["--seeds", "0-1", "--address", "x:1"], "--address names a Ray cluster, so it needs --backend ray."),
        (["--seeds", "0-1", "--total-steps", "0"], "--total-steps must be at least 1, got 0."),
    ],
)
def test_seeds_refuse_contradicting_flags_and_bad_lists(args, message, tmp_path, capsys):
    import train

    code = train.main([*args, "--out", str(tmp_path / "runs")])
    text = " ".join(capsys.readouterr().out.split())
    assert code == 2 and text.startswith("error: ") and message in text and text.endswith("."), text
    assert not (tmp_path / "runs").exists()
