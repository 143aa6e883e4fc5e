"""The benchmark suite (agents/tasks.py, benchmarks/suite.py, benchmarks/headroom.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from agents import smoke
from agents import tasks as suite
from envs import lookahead
from envs.core import Components, CoreConfig
from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.metrics import summarize
from heuristics import registry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import dagger  # noqa: E402
import headroom  # noqa: E402
import learnability  # noqa: E402
import suite as board  # noqa: E402


@pytest.mark.parametrize("task", list(suite.TASKS.values()), ids=list(suite.TASKS))
def test_every_task_builds_and_its_policies_may_run_at_its_level(task: suite.BenchTask) -> None:
    scenario = scenarios.get(task.scenario, dict(task.sets))
    assert scenario.information.level == task.information
    for name in task.heuristics:
        registry.check_information(name, task.information)  # raises if the level forbids it
        assert not registry.entry(name).oracle, name
    for name in task.oracles:
        assert registry.entry(name).oracle, name
    for key, value in task.policy_sets:  # a heuristic or oracle of the task, and a field it takes
        name, _, field = key.partition(".")
        assert name in (*task.heuristics, *task.oracles), key
        registry.make(name, {field: value})
    assert task.metric in __import__("envs.sim.metrics", fromlist=["METRICS"]).METRICS
    # the seed ranges never overlap: test seeds are never trained or evaluated on
    ranges = (task.train_seeds, task.eval_seeds, task.test_seeds)
    for i, a in enumerate(ranges):
        for b in ranges[i + 1 :]:
            assert max(a.start, b.start) >= min(a.stop, b.stop)
    assert len(task.test_seeds) == (40 if task.trained else 10)


def test_unknown_task_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="unknown task 'nope'; valid tasks: default"):
        suite.get("nope")


def test_paired_difference_and_headroom_logic() -> None:
    mean, ci = board.paired([10.0, 12.0, 14.0], [11.0, 13.0, 15.0])
    assert mean == pytest.approx(-1.0) and ci == pytest.approx(0.0)
    mean, ci = board.paired([1.0, 3.0], [2.0, 2.0])
    assert mean == pytest.approx(0.0) and ci is not None and ci > 1.0
    task = suite.get("default")
    rows = [
        board.Row("sjf", "heuristic", 100.0, 1.0, 3),
        board.Row("fifo", "heuristic", 150.0, 1.0, 3),
        board.Row("oracle-sjf", "oracle", 80.0, 1.0, 3),
    ]
    assert board.headroom(task, rows) == pytest.approx(0.2)
    higher = suite.get("deadline")
    rows = [board.Row("mlfs", "heuristic", 0.5, None, 1), board.Row("oracle-sjf", "oracle", 0.6, None, 1)]
    assert board.headroom(higher, rows) == pytest.approx(0.2)


def test_suite_prints_and_writes_a_leaderboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "board.json"
    md = tmp_path / "board.md"
    rc = board.main(["--tasks", "contention-none", "--seeds", "0-1", "--json", str(out), "--markdown", str(md)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert [d["task"] for d in doc] == ["contention-none"]
    kinds = {r["policy"]: r["kind"] for r in doc[0]["rows"]}
    assert kinds["qssf"] == "heuristic" and kinds["oracle-sjf"] == "oracle"
    means = {r["policy"]: r["mean"] for r in doc[0]["rows"]}
    task = suite.get("contention-none")
    best = min(means[p] for p in task.heuristics)
    assert doc[0]["headroom"] == pytest.approx((best - min(means[p] for p in task.oracles)) / best)
    assert "best realistic heuristic" in md.read_text() and "| oracle-sjf | oracle |" in capsys.readouterr().out
    # tiresias runs with the task's tuned thresholds, not the registered ones
    assert "`tiresias.thresholds_gpu_h=50`" in md.read_text()
    tiresias = next(r for r in doc[0]["rows"] if r["policy"] == "tiresias")["per_seed"]["0"]
    scenario = scenarios.get(task.scenario, smoke.sets(dict(task.sets)))
    tuned = scenarios.simulate(scenario, registry.make("tiresias", {"thresholds_gpu_h": "50"}), 0)
    registered = scenarios.simulate(scenario, registry.make("tiresias"), 0)
    assert tiresias == summarize(tuned)[task.metric] != summarize(registered)[task.metric]


def test_suite_refuses_an_unknown_task_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert board.main(["--tasks", "nope"]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err


def test_suite_check_reproduces_the_recorded_leaderboard_on_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    """Every policy of `default` (heuristics, oracles, the shipped agents) on its first test seed,
    against benchmarks/data/suite.json: the README's figures to the digit."""
    recorded = ROOT / "benchmarks" / "data" / "suite.json"
    assert board.main(["--tasks", "default", "--seeds", "200000", "--check", str(recorded)]) == 0
    task = suite.get("default")
    figures = len(task.heuristics) + len(task.oracles) + len(board.default_agents(task))
    assert f"check: all {figures} figures as in {recorded}" in capsys.readouterr().out


def test_suite_check_names_each_figure_that_differs_or_is_missing() -> None:
    want = {("t", "a"): {"1": 10.0, "2": 20.0}}
    lines, n = board.differences("t", {"a": {1: 10.0 + 1e-12, 2: 20.0 * (1 + 1e-6), 3: 5.0}}, want, "F")
    assert n == 3
    assert lines == [
        f"check: a on t seed 2: {20.0 * (1 + 1e-6)!r} here, 20.0 in F",
        "check: a on t seed 3: 5.0 here, none in F",
    ]
    assert board.differences("t", {"b": {1: 1.0}}, want, "F")[0] == ["check: b on t seed 1: 1.0 here, none in F"]


@pytest.mark.parametrize("content", [None, "not json", '{"task": 1}', '[{"task": "t", "rows": [{"policy": "a"}]}]'])
def test_suite_check_refuses_a_file_that_is_no_leaderboard_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None
) -> None:
    path = tmp_path / "board.json"
    if content is not None:
        path.write_text(content)
    assert board.main(["--tasks", "default", "--check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --check {path}: ") and err.count("\n") == 0


@pytest.mark.parametrize("seat", list(headroom.OPTIONS))
def test_lookahead_is_never_worse_than_its_base(seat: str) -> None:
    """The one-step lookahead in every seat tries the base's own choice, whose playout is the
    base's rest of the episode: so it can only gain (SJF's ranking is a function of the view, so
    the base's playout from a copy is the base's own). On these seeds each seat finds a gain."""
    config = CoreConfig.from_kwargs(
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "20", "workload.load": "1.6"},
        components=Components("sjf", "sjf", "sjf", "sjf"),
    )
    gains = []
    for seed in (1, 3):
        core = headroom._started(config, seed)
        base = lookahead.value(lookahead.play(core, "sjf", headroom.slots(core)), "avg_jct_s")
        ahead = headroom.lookahead(config, seed, "sjf", 2, "avg_jct_s", lower=True, seat=seat)
        assert ahead <= base + 1e-6
        gains.append(base - ahead)
    assert max(gains) > 0


def test_the_headroom_base_is_the_heuristic_as_it_runs_alone() -> None:
    """Every row's ordering seat sees the whole queue: on a long queue (default's 300 jobs at load
    3.0) the base in the seat scores what srtf scores run alone, where a 32-slot seat, which
    hides the queue's tail from it, scores far worse there (a strawman of the heuristic)."""
    sets = {"workload.load": "3.0"}
    config = CoreConfig.from_kwargs(scenario="default", overrides=sets, components=Components(*["srtf"] * 4))
    alone = summarize(scenarios.simulate(scenarios.get("default", sets), registry.make("srtf"), 100_000))["avg_jct_s"]
    core = headroom._started(config, 100_000)
    assert lookahead.value(lookahead.play(core, "srtf", headroom.slots(core)), "avg_jct_s") == alone
    assert lookahead.value(lookahead.play(headroom._started(config, 100_000), "srtf", 32), "avg_jct_s") > 1.2 * alone


@pytest.mark.parametrize("seat", list(headroom.OPTIONS))
def test_the_blind_lookahead_plays_every_seat_to_the_end(seat: str) -> None:
    config = CoreConfig.from_kwargs(
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "20", "workload.load": "3.0", "information.level": "none"},
        components=Components("gittins", "gittins", "gittins", "gittins"),
    )
    blind = headroom.lookahead(config, 1, "gittins", 2, "avg_jct_s", lower=True, seat=seat, samples=2)
    assert math.isfinite(blind) and blind > 0


@pytest.mark.parametrize(
    ("task", "count", "error"),
    [
        ("contention-none", "-1", "expected a count >= 0, got -1"),
        ("cloud", "2", "a blind lookahead does not draw the machines' latent speeds, and this cluster has them"),
    ],
)
def test_headroom_refuses_a_blind_lookahead_it_cannot_make(
    task: str, count: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert headroom.main(["--task", task, "--sampled", count, "--searches", "none"]) == 2
    assert capsys.readouterr().err == f"error: --sampled: {error}.\n"


def test_feature_r2_sees_the_deadline_window_and_not_the_fields() -> None:
    """In ``default`` durations are drawn apart from every job field, while a deadline is set
    from the duration (``deadline_slack`` times it): the fields predict nothing out of sample,
    the deadline window nearly everything."""
    config = CoreConfig.from_kwargs(scenario="default", overrides={"workload.synthetic.num_jobs": "100"})
    fields, window = headroom.feature_r2(config, [0, 1])
    assert fields < 0.1
    assert window > 0.8


def test_an_oracle_component_or_the_oracle_flag_shows_the_core_the_truth() -> None:
    """``CoreConfig.oracle``, or an ``oracle-*`` heuristic in a seat, gives the view the truth;
    otherwise it serves the scenario's level (here none: no duration is shown)."""
    sets = {"information.level": "none", "workload.synthetic.num_jobs": "20"}
    plain = CoreConfig.from_kwargs(
        scenario="default", overrides=sets, components=Components("qssf", "qssf", "qssf", "qssf")
    )
    for config, level in (
        (plain, "none"),
        (dataclasses.replace(plain, oracle=True), "clairvoyant"),
        (dataclasses.replace(plain, components=Components("oracle-speed", "qssf", "qssf", "qssf")), "clairvoyant"),
    ):
        core = headroom._started(config, 0)
        assert core.view.information == level


@pytest.mark.parametrize("task", [t for t in suite.TASKS.values() if t.trained], ids=lambda t: t.name)
def test_every_training_recipe_is_a_valid_train_command(task: suite.BenchTask) -> None:
    import train

    config = train.build_config(train.parse_args(task.train_command(3)))
    config.validate(train.flag_of)
    assert (config.scenario, config.seed, config.exp) == (task.scenario, 3, task.name)
    assert set(dict(task.sets).items()) <= set(config.overrides.items())
    assert config.baselines == task.heuristics


def test_oracle_mlfs_speed_is_mlfs_placed_by_true_speeds() -> None:
    from heuristics.oracles import TrueSpeedPlacement

    mlfs, oracle = registry.make("mlfs"), registry.make("oracle-mlfs-speed")
    assert isinstance(oracle.placement, TrueSpeedPlacement) and oracle.oracle
    for part in ("ordering", "preemption"):
        assert type(getattr(oracle, part)) is type(getattr(mlfs, part))
    s = scenarios.get("cloud", {"workload.synthetic.num_jobs": "40"})
    a = scenarios.simulate(s, mlfs, 0)
    o = scenarios.simulate(s, oracle, 0)
    assert (o.finish < float("inf")).all() and not (a.finish == o.finish).all()


SHIPPED = sorted(
    p.name
    for p in (ROOT / "pretrained").glob("*")
    if (p / "config.yaml").is_file() or (p / "agent.json").is_file()  # a run's agents, or a deviation agent
)


def test_pretrained_agents_are_shipped_for_the_readme() -> None:
    assert SHIPPED, "pretrained/ holds no agent, but the README's leaderboard lists them"


@pytest.mark.parametrize("name", SHIPPED)
def test_a_pretrained_agent_reproduces_the_recorded_leaderboard_on_its_first_test_seed(name: str) -> None:
    """The suite's recorded figure (benchmarks/data/suite.json, the README's leaderboard) for the
    shipped agent (``pretrained/<task>``, or the deviation agent ``pretrained/<task>-dagger``) on
    the task's first test seed, to 1e-9 of it: the file was recorded while the throughput model
    was fitted by numpy's BLAS, to last bits that followed the CPU (cloud's figure came out 2 ulp
    away on another machine); the exact fit that replaced it moved every rate by at most 7e-13
    (tests/test_cpu_identity.py)."""
    from agents import evaluation as ev
    from agents.trained import AGENT_PREFIX, DAGGER_PREFIX, agent_label

    board_doc = json.loads((ROOT / "benchmarks" / "data" / "suite.json").read_text())
    task = suite.get(name.removesuffix("-dagger"))
    entry = next(d for d in board_doc if d["task"] == task.name)
    spec = (DAGGER_PREFIX if name.endswith("-dagger") else AGENT_PREFIX) + str(ROOT / "pretrained" / name)
    row = next(r for r in entry["rows"] if r["policy"] == agent_label(spec))
    seed = task.test_seeds[0]
    (result,) = ev.execute(ev.plan([spec], [task.scenario], [seed], [dict(task.sets)]))
    assert result.metrics[task.metric] == pytest.approx(row["per_seed"][str(seed)], rel=1e-9, abs=0)


def test_preemption_options_leave_out_jobs_still_checkpointing() -> None:
    """A base that preempts gracefully (mlfs-hopeless) leaves jobs checkpointing among the
    running ones: the lookahead offers to preempt only jobs that run, so every option applies."""
    from envs.sim.policy import JobStatus, Preempt

    config = CoreConfig.from_kwargs(
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "30", "workload.load": "1.6"},
        components=Components("sjf", "sjf", "sjf", "sjf"),
    )
    core = headroom._started(config, 1)
    while len(core.view.running) < 2 or not core.view.pending:
        visible, _ = core.next_choice(headroom.slots(core))
        assert not core.done
        job = core.expert_job(core.heuristic("sjf").ordering, visible)
        core.advance() if job is None else core.start(job)
    first = sorted(core.view.running)[0]
    core.apply(Preempt(first, graceful=True))
    assert core.view.status_of(first) == JobStatus.PREEMPTING
    visible, fits = core.choices(headroom.slots(core))
    options = headroom._preemption_options(core, None, visible, fits, 100)
    assert len(options) == len(core.view.running)  # the base's own, and each running job but the one checkpointing
    for step in options:
        step(core.copy())


def test_agents_of_several_runs_are_summarised_over_the_runs() -> None:
    task = suite.get("default")
    rows = [
        board.Row("sjf", "heuristic", 100.0, 1.0, 3),
        board.Row("ppo:a", "agent", 96.0, 1.0, 3, -4.0, 1.0),
        board.Row("ppo:b", "agent", 98.0, 1.0, 3, -2.0, 1.0),
        board.Row("ppo:c", "agent", 100.0, 1.0, 3, 0.0, 1.0),
    ]
    runs = board.over_runs(rows)
    assert runs is not None and runs.n == 3 and runs.kind == "runs"
    assert runs.mean == pytest.approx(98.0) and runs.diff == pytest.approx(-2.0)
    # std 2 over three runs: t(0.975, 2) * 2 / sqrt(3)
    assert runs.ci95 == pytest.approx(4.302653 * 2 / 3**0.5, rel=1e-6) and runs.diff_ci95 == pytest.approx(runs.ci95)
    assert "| agents over 3 runs | runs | 98 | ± 4.968 | -2.000 ± 4.968 |" in "\n".join(
        board.render(task, rows, [0, 1, 2])
    )
    assert board.over_runs(rows[:2]) is None  # one agent: nothing to summarise


def test_learnability_records_each_option_against_the_base_choice() -> None:
    """Every decision's options are played on by the base: the base's own choice has advantage 0
    and is first, so the best advantage is never positive; some option beats it somewhere."""
    env = learnability.OrderingEnv(
        max_jobs=32,
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "20", "workload.load": "1.6"},
        **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "sjf"),
    )
    decisions = learnability.collect(env, "sjf", [1, 3], 2, "avg_jct_s", lower=True)
    assert decisions and all(d.advantages[0] == 0.0 and len(d.features) == len(d.advantages) for d in decisions)
    assert min(d.advantages.min() for d in decisions) < 0.0


def test_learnability_finds_a_gain_that_the_features_show_and_none_in_noise() -> None:
    """Where an option's advantage is one of its features, the held-out deviations realise a gain;
    where the features are noise, a wide margin keeps the base's choice."""
    rng = np.random.default_rng(0)
    shown, noise = [], []
    for i in range(300):
        adv = np.concatenate([[0.0], rng.normal(0.0, 1.0, 3)])
        feats = rng.normal(0.0, 1.0, (4, 5)).astype(np.float32)
        noise.append(learnability.Decision(i % 6, feats.copy(), adv))
        feats[:, 0] = adv - adv[0]
        shown.append(learnability.Decision(i % 6, feats, adv))
    mean, _, deviating = learnability.held_out(shown, 3, [0.0], 0)[0.0]
    assert mean < -0.5 and deviating > 0.5
    mean, _, deviating = learnability.held_out(noise, 3, [20.0], 0)[20.0]
    assert mean == 0.0 and deviating == 0.0


def test_learnability_blind_labels_every_nth_decision_against_the_base_choice() -> None:
    """With ``samples``, each labelled decision also has advantages over redrawn futures, the base's
    own choice first at 0; ``every`` labels every n-th decision with a choice."""
    env = learnability.OrderingEnv(
        max_jobs=32,
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "20", "workload.load": "1.6"},
        **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "sjf"),
    )
    every = learnability.collect(env, "sjf", [1, 3], 2, "avg_jct_s", lower=True)
    blind = learnability.collect(env, "sjf", [1, 3], 2, "avg_jct_s", lower=True, samples=2, every=2)
    assert len(blind) == sum((len([d for d in every if d.episode == e]) + 1) // 2 for e in (0, 1))
    for d in blind:
        assert d.blind is not None and d.blind[0] == 0.0 and len(d.blind) == len(d.advantages)
    assert any(d.blind is not None and d.blind.min() < 0.0 for d in blind)
    assert all(d.blind is None for d in every)


def test_learnability_fits_the_blind_labels_and_realises_the_true_ones() -> None:
    """Where the blind advantages are a feature but the true ones are their opposite, the learned
    deviations follow the blind ones and realise a loss."""
    rng = np.random.default_rng(0)
    decisions = []
    for i in range(300):
        adv = np.concatenate([[0.0], rng.normal(0.0, 1.0, 3)])
        feats = rng.normal(0.0, 1.0, (4, 5)).astype(np.float32)
        feats[:, 0] = adv
        decisions.append(learnability.Decision(i % 6, feats, -adv, blind=adv))
    mean, _, deviating = learnability.held_out(decisions, 3, [0.0], 0)[0.0]
    assert mean > 0.5 and deviating > 0.5


def test_learnability_refuses_bad_arguments_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert learnability.main(["--task", "nope"]) == 2
    assert learnability.main(["--episodes", "1"]) == 2
    assert learnability.main(["--sampled", "-1"]) == 2
    assert learnability.main(["--every", "0"]) == 2
    assert learnability.main(["--task", "cloud", "--sampled", "2"]) == 2  # no redraw of latent speeds
    assert capsys.readouterr().err.count("error:") == 5


def test_dagger_labels_the_states_its_own_deviations_reach() -> None:
    """Round 0 follows the base; round 1 follows the learned deviations (margin 0, so some are
    taken) and labels decisions after them, off the base's trajectory; a margin no prediction
    passes plays exactly the base."""
    env = learnability.OrderingEnv(
        max_jobs=32,
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "20", "workload.load": "1.6"},
        **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "fifo"),
    )
    (first, predict, scale), (second, _, _) = dagger.rounds(
        env, "fifo", [[1, 3], [5, 7]], 2, "avg_jct_s", True, [0.0], 0, 5
    )
    assert first and not any(d.off for d in first) and scale > 0
    assert any(d.off for d in second) and {d.episode for d in second} == {2, 3}
    assert all(d.advantages[0] == 0.0 for d in second)
    base, _ = dagger.closed_loop(env, "fifo", [1, 3], 2, "avg_jct_s", None)
    never, deviating = dagger.closed_loop(env, "fifo", [1, 3], 2, "avg_jct_s", dagger.dv.deviation(predict, 1e9))
    assert never == base and deviating == 0.0
    _, deviating = dagger.closed_loop(env, "fifo", [1, 3], 2, "avg_jct_s", dagger.dv.deviation(predict, 0.0))
    assert deviating > 0.0


def test_dagger_refuses_bad_arguments_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert dagger.main(["--task", "nope"]) == 2
    assert dagger.main(["--rounds", "0"]) == 2
    assert dagger.main(["--margins", "1,x"]) == 2
    assert dagger.main(["--seed", "9990"]) == 2  # 12 episodes from 9990 leave the training seeds
    assert dagger.main(["--every", "0"]) == 2
    assert dagger.main(["--sampled", "-1"]) == 2
    assert dagger.main(["--task", "cloud", "--sampled", "2"]) == 2  # no redraw of latent speeds
    assert dagger.main(["--select-seeds", "-1"]) == 2
    assert dagger.main(["--seed", "9940", "--select-seeds", "50"]) == 2  # its rounds would label selection seeds
    err = capsys.readouterr().err
    assert err.count("error:") == 9 and "training seeds 0-9999" in err and "--sampled: a blind lookahead" in err
    assert "training seeds 0-9949 (from 9950 on they select: --select-seeds 50)" in err


def test_the_deadline_ceiling_counts_the_deadlines_a_job_could_meet_alone() -> None:
    """Deadlines the workload sets at 1.1x a job's run time or later can all be met by the job
    alone at its fastest rate (the ceiling is 1); at half its run time and no window, only jobs
    that may stop early at their required accuracy, under half their work, still could."""

    def ceiling(factor: str, window: str) -> float:
        sets = {"workload.synthetic.num_jobs": "40", "ml.deadline_factor": factor}
        sets["ml.deadline_window_h"] = window
        config = CoreConfig.from_kwargs(scenario="deadline", overrides=sets, components=Components(*["mlfs"] * 4))
        return headroom.deadline_ceiling(config, [0, 1])

    assert ceiling("1.1", "0.5,24") == 1.0
    assert 0.0 < ceiling("0.5", "0,0") < 0.5


def test_a_saved_deviation_agent_plays_in_evaluate_as_in_the_closed_loop(tmp_path: Path) -> None:
    """``dagger:FOLDER`` replays dagger.py's closed loop to the digit: the network deviates (margin
    0), so it is not its base; at a margin no prediction passes it is its base in the seat."""
    import torch as th

    from agents import deviation as dv
    from agents import evaluation as ev
    from agents.trained import model_bytes

    th.manual_seed(0)
    net = dv.network()
    sets = {"workload.synthetic.num_jobs": "30"}
    env = learnability.OrderingEnv(
        max_jobs=32, scenario="default", overrides=sets, **dict.fromkeys(Components.SEATS, "sjf")
    )
    figures = {}
    for margin in (0.0, 1e9):
        folder = tmp_path / f"m{margin:g}"
        dv.save(folder, net, "sjf", 2, margin, 32, {"task": "test"})
        loop, deviating = dagger.closed_loop(
            env, "sjf", [1, 2], 2, "avg_jct_s", dv.deviation(dv.NetPredictor(net), margin)
        )
        assert (deviating > 0.0) == (margin == 0.0)
        tasks = ev.plan(["sjf", f"dagger:{folder}"], ["default"], [1, 2], [sets])
        shipped = model_bytes([t.agent for t in tasks if t.agent is not None])  # as evaluate.py sends them
        results = ev.execute(tasks, workers=1, models=shipped)
        figures[margin] = {(r.task.policy, r.task.seed): r.metrics["avg_jct_s"] for r in results}
        assert [figures[margin][(f"dagger:m{margin:g}", s)] for s in (1, 2)] == loop
    assert [figures[1e9][("dagger:m1e+09", s)] for s in (1, 2)] == [figures[1e9][("sjf", s)] for s in (1, 2)]
    assert figures[0.0][("dagger:m0", 1)] != figures[0.0][("sjf", 1)]


def test_a_deviation_agent_folder_that_does_not_load_is_one_sentence(tmp_path: Path) -> None:
    import torch as th

    from agents import deviation as dv
    from agents import evaluation as ev

    folder = tmp_path / "agent"
    with pytest.raises(ConfigError, match=r"agent: no network.pt or agent.json; is it a folder that dagger.py"):
        ev.plan([f"dagger:{folder}"], ["default"], [1])
    th.manual_seed(0)
    dv.save(folder, dv.network(), "sjf", 2, 1.0, 32, {})
    record = json.loads((folder / "agent.json").read_text())
    for change, match in (
        ({"margin": -1}, r"agent: not a deviation agent that this code loads \(agent.json's margin must be"),
        ({"obs_version": 1}, r"agent: its network was trained for observation layout 1 .*; retrain it\."),
        ({"base": None}, r"agent: not a deviation agent .*needs a base heuristic's name"),
        ({"kind": "ppo"}, r"agent: not a deviation agent .*no \"kind\": \"dagger\""),
    ):
        (folder / "agent.json").write_text(json.dumps(record | change))
        with pytest.raises(ConfigError, match=match):
            ev.plan([f"dagger:{folder}"], ["default"], [1])
    (folder / "agent.json").write_text(json.dumps({k: v for k, v in record.items() if k != "width"}))
    with pytest.raises(ConfigError, match=r"agent: agent\.json has no field 'width'"):
        ev.plan([f"dagger:{folder}"], ["default"], [1])
    (folder / "agent.json").write_text(json.dumps(record))
    (folder / "network.pt").write_bytes(b"not a network")
    with pytest.raises(ConfigError, match="agent: not a deviation agent that this code loads"):
        ev.plan([f"dagger:{folder}"], ["default"], [1])
    dv.save(folder, dv.network(), "sjf", 2, 1.0, 32, {})
    with pytest.raises(ConfigError, match="none"):  # its base reads durations, which that level hides
        ev.plan([f"dagger:{folder}"], ["default"], [1], [{"information.level": "none"}])


def test_dagger_save_refuses_a_folder_with_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert dagger.main(["--task", "default", "--save", str(tmp_path)]) == 2
    assert dagger.main(["--task", "default", "--save", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert "holds other files (notes.txt)" in err and "is a file, not a folder" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_dagger_prints_seconds_to_a_tenth_and_ratios_to_four_digits() -> None:
    assert [dagger._fig(x) for x in (17032.64, 29.93, 0.94125, -0.002134)] == [
        "17,032.6",
        "29.9",
        "0.9413",
        "-0.002134",
    ]
    assert dagger._fig(-52.01, "+") == "-52.0" and dagger._fig(0.0021, "+") == "+0.0021"


def test_dagger_keeps_the_base_where_no_margin_beats_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A margin no prediction passes never deviates, so it cannot beat the base on the evaluation
    seeds: the run's policy is the base, and nothing is saved or played on the test seeds."""
    monkeypatch.setenv(smoke.VARIABLE, "1")
    args = ["--task", "default", "--rounds", "1", "--episodes", "1", "--width", "1", "--epochs", "1"]
    margins = ["--margins", "1e9", "--rollout-margins", "1e9", "--save", str(tmp_path / "agent")]
    assert dagger.main(args + margins) == 0
    out = capsys.readouterr().out
    assert "no round and margin beat srsf-eft in the seat on the evaluation seeds" in out and "test seeds" not in out
    assert not (tmp_path / "agent").exists()
