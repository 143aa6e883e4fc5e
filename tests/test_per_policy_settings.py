"""evaluate.py's per-policy settings: ``--set tiresias.round_s=60,300`` sets and sweeps one
policy's parameter beside baselines that lack it, ``policy.*`` still sets every policy listed,
and a sweep's ratios compare each policy with the reference at the same scenario settings."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

import evaluate
from agents import evaluation as ev
from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.metrics import METRICS, TIMING_KEYS
from heuristics import registry

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "workload.synthetic.num_jobs=40"]


def test_one_policys_sweep_beside_a_baseline_that_lacks_it(tmp_path: Path):
    out = tmp_path / "grid"
    cmd = [sys.executable, "evaluate.py", "--policies", "fifo,tiresias", "--seeds", "0-1", *SMALL]
    cmd += ["--set", "cluster.training_servers=8,16", "--set", "tiresias.round_s=60,300", "--workers", "1"]
    done = subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    runs = {
        (r["policy"], r["settings"]["cluster.training_servers"], r["settings"].get("tiresias.round_s"))
        for r in doc["runs"]
    }
    # fifo runs once per scenario setting (it has no round_s), tiresias once per round_s as well
    assert sorted(runs, key=str) == sorted(
        {("fifo", n, None) for n in ("8", "16")} | {("tiresias", n, r) for n in ("8", "16") for r in ("60", "300")},
        key=str,
    )
    assert len(doc["runs"]) == 6 * 2  # six (policy, setting) points, two seeds
    mean = {
        (a["policy"], json.dumps(a["settings"], sort_keys=True)): a["metrics"]["avg_jct_s"]["mean"]
        for a in doc["aggregates"]
    }
    tiresias_rows = [r for r in doc["ratios"] if r["policy"] == "tiresias"]
    assert len(tiresias_rows) == 4
    for row in tiresias_rows:  # each against fifo on the same cluster, never against itself
        ref = row["reference_settings"]
        assert "tiresias.round_s" not in ref
        assert {k: v for k, v in row["settings"].items() if k != "tiresias.round_s"} == ref
        mine = mean[("tiresias", json.dumps(row["settings"], sort_keys=True))]
        theirs = mean[("fifo", json.dumps(ref, sort_keys=True))]
        assert row["metrics"]["avg_jct_s"] == mine / theirs
    assert "round_s=300" in done.stdout and "tiresias" in done.stdout
    # TensorBoard: one run, each point of the sweep on its own step; fifo, which lacks round_s, at each
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run,) = (out / "tb").iterdir()
    acc = EventAccumulator(str(run), size_guidance={"images": 0, "scalars": 0, "tensors": 0})
    acc.Reload()
    grid = [("8", "60"), ("8", "300"), ("16", "60"), ("16", "300")]
    for policy in ("fifo", "tiresias"):
        got = [(e.step, e.value) for e in acc.Scalars(f"eval/avg_jct_s/{policy}")]
        want = []
        for step, (n, r) in enumerate(grid):
            sets = {"workload.synthetic.num_jobs": "40", "cluster.training_servers": n}
            sets |= {"tiresias.round_s": r} if policy == "tiresias" else {}
            want.append((step, pytest.approx(mean[(policy, json.dumps(sets, sort_keys=True))], rel=1e-6)))
        assert got == want
    assert [e.step for e in acc.Images("plots/jct_cdf")] == [0, 2]  # each cluster size's plots at its first step
    table = acc.Tensors("sweep")[0].tensor_proto.string_val[0].decode()
    assert "| step | cluster.training_servers | tiresias.round_s |" in table and "| 3 | 16 | 300 |" in table


def test_a_policys_own_setting_reaches_it_as_policy_dot_does():
    """``tiresias.round_s=60`` builds the same policy as ``policy.round_s=60`` with tiresias alone,
    and another round length moves the results (so the setting is not lost on the way)."""
    small = {"workload.synthetic.num_jobs": "40", "cluster.training_servers": "4"}

    def task(**sets: str) -> ev.Task:
        (t,) = ev.plan(["tiresias"], ["default"], [0], [small | sets])
        return t

    own, every, slow = (
        task(**{"tiresias.round_s": "60"}),
        task(**{"policy.round_s": "60"}),
        task(**{"tiresias.round_s": "3600"}),
    )
    assert own.own_sets == (("round_s", "60"),) and own.policy_sets == ()
    assert own.policy_overrides == every.policy_overrides == {"round_s": "60"}
    assert own.settings["tiresias.round_s"] == "60" and own.key() != every.key()

    def figures(t: ev.Task) -> dict:
        return {k: v for k, v in ev.run_task(t).metrics.items() if k not in TIMING_KEYS}

    assert figures(own) == figures(every) != figures(slow)


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (["sjf.type_order=x"], "--set sjf.type_order sets policy 'sjf', which is not among the evaluated policies"),
        (
            ["policy.round_s=60,300"],
            "policy 'fifo' does not take --set policy.round_s (unknown policy 'fifo' setting 'round_s'; "
            "valid settings: type_order, elastic, start), which sets every policy of the sweep; set one policy's with "
            "--set tiresias.round_s=60.",
        ),
        (["policy.round_s=60", "tiresias.round_s=30"], "both set tiresias's round_s; give one of them."),
        (["tiresias.nosuch=1"], "unknown policy 'tiresias' setting 'nosuch'"),
    ],
)
def test_bad_policy_settings_exit_2_with_one_sentence_and_write_nothing(sets, expected, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--policies", "fifo,tiresias"] + [x for s in sets for x in ("--set", s)]
    assert evaluate.main([*args, "--out", str(out)]) == 2
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("error:") and expected in text
    assert not out.exists()


def _agg(policy: str, avg: float, **settings: str) -> ev.Aggregate:
    metrics = {k: ev.Stat(1.0, None, None, 1) for k in METRICS} | {"jobs_unfinished": ev.Stat(0.0, None, None, 1)}
    metrics["avg_jct_s"] = ev.Stat(avg, None, None, 1)
    return ev.Aggregate(policy, "default", tuple(settings.items()), (0,), metrics)


def test_the_reference_is_the_one_at_the_same_scenario_settings():
    c8 = {"cluster.training_servers": "8"}
    fifo = _agg("fifo", 100.0, **c8)
    t60 = _agg("tiresias", 50.0, **c8, **{"tiresias.round_s": "60"})
    t300 = _agg("tiresias", 80.0, **c8, **{"tiresias.round_s": "300"})
    fifo16 = _agg("fifo", 10.0, **{"cluster.training_servers": "16"})
    aggs = [fifo, t60, t300, fifo16]
    assert t60.scenario_settings == fifo.scenario_settings and t60.policy_settings == (("tiresias.round_s", "60"),)
    by = {(r["policy"], r["settings"].get("tiresias.round_s")): r for r in ev.ratios(aggs, "fifo")}
    assert (
        by[("tiresias", "60")]["metrics"]["avg_jct_s"] == 0.5 and by[("tiresias", "300")]["metrics"]["avg_jct_s"] == 0.8
    )
    assert by[("tiresias", "60")]["reference_settings"] == c8
    # with the swept policy as the reference, a baseline that lacks the setting has no single reference
    rows = ev.ratios(aggs, "tiresias")
    assert {(r["policy"], r["settings"].get("tiresias.round_s")) for r in rows} == {
        ("tiresias", "60"),
        ("tiresias", "300"),
    }
    assert all(r["metrics"]["avg_jct_s"] == 1.0 for r in rows)
    # policy.* settings (every policy's) must agree with the reference's where both have them
    p60, p300 = _agg("tiresias", 5.0, **{"policy.round_s": "60"}), _agg("tiresias", 6.0, **{"policy.round_s": "300"})
    other = _agg("aryl", 3.0, **{"policy.round_s": "300"})
    assert ev.reference_of(other, [p60, p300, other], "tiresias") is p300


def test_a_sweep_over_whole_numbers_is_a_curve_over_those_numbers(tmp_path: Path):
    """One axis of whole numbers: the steps are its values; another axis: the point's index."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from agents import plots

    aggs = [_agg("fifo", 100.0)] + [
        _agg("tiresias", v, **{"tiresias.round_s": r}) for r, v in (("60", 50.0), ("300", 80.0))
    ]
    plots.write_tensorboard(aggs, {}, tmp_path / "tb")
    (run,) = (tmp_path / "tb").iterdir()
    acc = EventAccumulator(str(run))
    acc.Reload()
    assert run.name == "default"
    assert [(e.step, e.value) for e in acc.Scalars("eval/avg_jct_s/tiresias")] == [(60, 50.0), (300, 80.0)]
    assert [(e.step, e.value) for e in acc.Scalars("eval/avg_jct_s/fifo")] == [(60, 100.0), (300, 100.0)]
    sigma = [_agg("sjf", v, **{"information.sigma": x}) for x, v in (("0.5", 1.0), ("2", 2.0))]
    (swept,) = plots.sweep_runs(sigma)
    assert swept.axes == ("information.sigma",) and [s for s, _ in swept.points] == [0, 1]
    (still,) = plots.sweep_runs([_agg("fifo", 1.0, **{"cluster.training_servers": "8"})])
    assert still.axes == () and list(still.at) == [0] and still.name == "default__cluster.training_servers-8"


def test_no_policy_is_named_like_a_scenario_field():
    """``<name>.<field>`` means a policy's setting only because no scenario has a field so named."""
    fields = {f.name for s in scenarios.names() for f in dataclasses.fields(scenarios.get(s, {}))}
    assert fields and not fields & {*registry.names(), "policy"}
    scen, every, own = ev.split_sets(
        {"cluster.training_servers": "8", "policy.round_s": "60", "fifo.type_order": "x"}, ["tiresias", "fifo"]
    )
    assert (
        scen == {"cluster.training_servers": "8"}
        and every == {"round_s": "60"}
        and own == {"fifo": {"type_order": "x"}}
    )
    with pytest.raises(ConfigError, match="both set"):
        ev.split_sets({"policy.round_s": "60", "tiresias.round_s": "1"}, ["tiresias"])


# ---------------------------------------------------------------------------------------------- --list-settings, --help
def test_list_settings_prints_every_key_with_its_type_and_default():
    done = subprocess.run(
        [sys.executable, "evaluate.py", "--list-settings", "loaning"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = ev.setting_keys("loaning")
    assert {"cluster.training_servers", "workload.synthetic.num_jobs", "tiresias.round_s"} <= {r.key for r in rows}
    for r in rows:  # the row of each key starts with the key, its type and its default
        (line,) = [ln for ln in lines if ln.startswith(f"│ {r.key} ")]
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert cells[0] == r.key and r.type.startswith(cells[1]) and r.default.startswith(cells[2])
    servers = next(r for r in rows if r.key == "cluster.training_servers")
    assert (servers.type, servers.default) == ("int", str(scenarios.get("loaning", {}).cluster.training_servers))
    assert servers.rule.startswith("must be")
    bad = subprocess.run(
        [sys.executable, "evaluate.py", "--list-settings", "nosuch"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout.startswith("error: unknown scenario 'nosuch'")


@pytest.mark.parametrize("scenario", [s for s in scenarios.names() if s != "trace"])
def test_every_listed_default_is_what_set_takes_back(scenario: str):
    """Each key's default, given back to --set, leaves the scenario (and each policy) as it is."""
    from envs.sim.config import apply_overrides

    scen = scenarios.get(scenario, {})
    for r in ev.setting_keys(scenario):
        head = r.key.split(".", 1)[0]
        if head in registry.names():
            config = registry.entry(head).config
            assert config is not None
            field_ = r.key.split(".", 1)[1]
            assert apply_overrides(config(), {field_: r.default}) == config(), r
        else:
            assert apply_overrides(scen, {r.key: r.default}) == scen, r


@pytest.mark.parametrize(
    ("cli", "shown"),
    [
        ("evaluate.py", "(default: fifo,sjf,tiresias)"),
        ("demos.py", "(default: 20)"),
        ("train.py", "(default: runs)"),
    ],
)
def test_help_shows_the_defaults(cli: str, shown: str):
    done = subprocess.run([sys.executable, cli, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and shown in text
    assert "(default: None)" not in text and "(default: [])" not in text and "(default: False)" not in text
