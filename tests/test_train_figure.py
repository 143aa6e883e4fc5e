"""The best checkpoint is the evaluation that scores best by the reward's own figure (for
``reward=deadline``: the deadline hit ratio, higher being better), and older run folders, whose
best was kept by avg JCT whatever the reward, still load where that is what they mean."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest

import train
from agents import rundir
from agents.dual import SCHED_KEYS, TrainConfig
from envs.core import REWARDS
from envs.sim.metrics import METRICS
from tests.test_train_robust import TINY, state


def test_every_reward_names_a_metric_and_its_direction():
    for name, r in REWARDS.items():
        c = TrainConfig(reward=name)
        assert r.figure in METRICS and c.figure == r.figure
        assert c.eval_keys()[: len(SCHED_KEYS)] == SCHED_KEYS and c.figure in c.eval_keys()
        assert c.best_tag() == f"eval/best_{r.figure}"
        assert c.better(5.0, None)
        assert c.better(1.0, 2.0) is r.lower_better and c.better(2.0, 1.0) is not r.lower_better
    assert not REWARDS["deadline"].lower_better and REWARDS["jct"].lower_better


@pytest.fixture(scope="module")
def deadline_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A tiny run with reward=deadline on default (whose jobs mostly carry deadlines): its folder
    and what train.py printed."""
    out = tmp_path_factory.mktemp("deadline")
    args = [*TINY, "--set", "reward=deadline", "--out", str(out / "runs"), "--demos", str(out / "demos")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert train.main(args) == 0
    (run,) = (out / "runs").iterdir()
    return run, " ".join(printed.getvalue().split())


def test_the_best_checkpoint_is_the_best_deadline_hit_ratio(deadline_run: tuple[Path, str]):
    run, printed = deadline_run
    s = state(run)
    assert s["version"] == rundir.STATE_VERSION
    hits = [e["agent"]["deadline_hit_ratio"] for e in s["evals"] if e["agent"]["jobs_unfinished"] == 0]
    assert len(hits) == len(s["evals"]) >= 2 and s["best"] == max(hits)
    assert all("deadline_hit_ratio" in m for e in s["evals"] for m in e["baselines"].values())
    # each progress line and the tables show the figure beside the avg JCT
    assert printed.count("eval: agent avg JCT") == printed.count(", deadline_hit_ratio ") == len(s["evals"])
    assert f"best agent deadline_hit_ratio {max(hits):.3f}" in printed


def _as_version_2(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    doc = state(dst)
    doc["version"] = 2
    doc["best_jct"] = doc.pop("best")
    (dst / "state.json").write_text(json.dumps(doc))
    return dst


def test_a_version_2_folder_loads_only_where_its_best_means_what_the_reward_asks(
    deadline_run: tuple[Path, str], tmp_path: Path
):
    run, _ = deadline_run
    old = _as_version_2(run, tmp_path / "old")
    config = rundir.load_config(old)
    assert config.reward == "deadline"
    # its agents still evaluate: the checkpoints are found as before
    assert rundir.checkpoint_files(old).keys() == rundir.checkpoint_files(run).keys()
    # but it cannot train on: its best was kept by avg JCT, not by the deadline hit ratio
    with pytest.raises(rundir.RunDirError, match=r"kept its best checkpoint by avg JCT, not by the 'deadline'"):
        rundir.read_state(old, config)
    # under reward=jct the old key is read as the new one, and the next commit writes version 3
    jct = dataclasses.replace(config, reward="jct")
    st, _ = rundir.read_state(old, jct)
    assert st.best == state(run)["best"]
    rundir.commit(old, st, {})
    assert state(old)["version"] == rundir.STATE_VERSION and "best_jct" not in state(old)
