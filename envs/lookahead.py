"""A clairvoyant one-step lookahead over a heuristic: at a decision, each option is tried on a
copy of the whole simulation, which the heuristic then plays to its end, and the option whose
episode scores best is taken.

The copies know every future arrival, duration and random fluctuation of the episode, so the
lookahead is an oracle: it measures headroom (``benchmarks/headroom.py``) and teaches (the
``oracle-lookahead-BASE`` expert of the ordering env, whose demonstrations an agent that sees
only its observation can clone). It is at least as good as its base on every episode where the
base's own choice is always among the options (it is; ties keep the base's choice), at the cost
of one simulation per option per decision.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np

from envs.core import REWARDS, Core
from envs.sim.policy import JobStatus

Step = Callable[[Core], None]
"""One decision applied to a core (start a job, advance, preempt...)."""

PREFIX = "oracle-lookahead-"
"""An expert named ``oracle-lookahead-BASE`` is the lookahead over heuristic ``BASE``."""

WIDTH = 3
"""Options an expert tries beside its base's own choice (the next jobs that can start)."""


def base_of(expert: str) -> str | None:
    """The base heuristic of a lookahead expert's name, or None for any other name."""
    return expert[len(PREFIX) :] if expert.startswith(PREFIX) else None


def heuristic_of(expert: str) -> str:
    """The heuristic behind an expert's name: a lookahead's base, else the name itself."""
    return base_of(expert) or expert


def play(core: Core, ordering: str, slots: int) -> Core:
    """Play ``core`` to its end with heuristic ``ordering`` in the ordering seat (seeing ``slots``
    waiting jobs, as an agent with that many slots would): at each decision point the next job of
    its ranking that can start, else "advance". Only the jobs its ranking reaches are placed (the
    ordering env's ``next_choice`` places every visible one, to build the mask)."""
    ranking = core.heuristic(ordering).ordering
    while True:
        if core.done:
            return core
        job = core.expert_job(ranking, list(itertools.islice(core.view.pending, slots)))
        if job is None:
            core.advance()
        else:
            core.start(job)


def value(core: Core, metric: str) -> float:
    """The finished episode's ``metric`` (NaN where it is undefined)."""
    assert core.metrics is not None
    v = core.metrics[metric]
    return float("nan") if v is None else float(v)


def best(core: Core, options: Sequence[Step], base: str, slots: int, metric: str, lower: bool) -> int:
    """The index of the option whose episode, played on by ``base`` from a copy of ``core``,
    scores best by ``metric`` (the first of equals: put the base's own choice first)."""
    if len(options) < 2:
        return 0
    sign = 1.0 if lower else -1.0
    scores = []
    for step in options:
        trial = core.copy()
        step(trial)
        scores.append(sign * value(play(trial, base, slots), metric))
    return scores.index(min(scores))


def check_blind(core: Core) -> None:
    """Raise ValueError where :func:`redrawn` cannot hide what the run's policies do not see:
    machines' latent speed factors."""
    assert core.engine is not None
    if any(server.speed_factor != 1.0 for server in core.engine.cluster.servers):
        raise ValueError("a blind lookahead does not draw the machines' latent speeds, and this cluster has them")


def redrawn(core: Core, rng: np.random.Generator, window: int = 200) -> Core | None:
    """A copy of ``core`` in which what the run's policies cannot see is drawn anew:

    - the work of the jobs to come, uniformly from that of the last ``window`` arrived jobs
      (at information ``estimate``, from their estimates);
    - at information ``estimate``, the work of every job that has arrived and not finished:
      log-normal about the estimate the view shows (its median, as a log-uniform prior has it),
      with the error model's spread (the scenario's ``sigma`` and ``user_sigma`` together), above
      the work the job has done; the copy's view shows the same estimates as the run's;
    - at information ``none``, the work of every job not yet finished, uniformly from the work
      of the last ``window`` finished jobs above what it has done (the distribution gittins ranks
      by; twice its work done where no finished job did more);
    - the arrival times of the jobs to come, in their order, as a Poisson process at the rate of
      the arrivals so far;
    - the speed fluctuations, from ``rng``.

    The copy still knows how many jobs are to come and their sizes. None where there is nothing
    to draw from yet: no arrival (and at ``none``, no finish). It raises where
    :func:`check_blind` does."""
    check_blind(core)
    view = core.view
    blind = view.information == "none"
    finished, _ = view.finished_since(0)
    status = [view.status_of(j) for j in range(view.num_jobs)]
    future = [j for j, s in enumerate(status) if s == JobStatus.FUTURE]
    if len(future) == view.num_jobs or view.now <= 0.0 or (blind and not finished):
        return None
    if blind:
        unknown = [j for j, s in enumerate(status) if s != JobStatus.DONE]
        ranked = sorted(view.work_done(j) for j in finished[-window:])
    else:  # the jobs to come, from the work of the last ``window`` arrived
        unknown = future
        arrived = [j for j, s in enumerate(status) if s != JobStatus.FUTURE]
        ranked = sorted(view.state(j).work_total for j in arrived[-window:])
    works: dict[int, float] = {}
    for job in unknown:
        done = view.work_done(job)
        k = bisect.bisect_right(ranked, done)
        works[job] = ranked[k + int(rng.integers(len(ranked) - k))] if k < len(ranked) else 2.0 * max(done, 1.0)
    if view.information == "estimate":
        info = core.config.scenario_obj().information
        sigma = math.hypot(info.sigma, info.user_sigma)
        for job in (j for j, s in enumerate(status) if s not in (JobStatus.FUTURE, JobStatus.DONE)):
            done, total = view.work(job)
            works[job] = _above(total, done, sigma, rng)
    gap = view.now / (view.num_jobs - len(future))
    times = view.now + np.cumsum(rng.exponential(gap, len(future)))
    trial = core.copy()
    assert trial.engine is not None
    trial.engine.redraw(works, rng.spawn(1)[0], dict(zip(future, times.tolist(), strict=True)))
    return trial


def _above(median: float, done: float, sigma: float, rng: np.random.Generator) -> float:
    """A log-normal draw of median ``median`` and log standard deviation ``sigma``, conditioned
    on exceeding ``done`` (below ``median``), by inverting the normal distribution function."""
    if sigma == 0.0:
        return median
    low = _NORMAL.cdf(math.log(done / median) / sigma) if done > 0.0 else 0.0
    u = min(max(low + (1.0 - low) * float(rng.random()), _TINY), 1.0 - _TINY)
    return max(median * math.exp(sigma * _NORMAL.inv_cdf(u)), math.nextafter(done, math.inf))


_NORMAL = statistics.NormalDist()
_TINY = 1e-15


def best_sampled(
    core: Core,
    options: Sequence[Step],
    base: str,
    slots: int,
    metric: str,
    lower: bool,
    rng: np.random.Generator,
    samples: int,
) -> int:
    """:func:`best` without foresight: each option is played on by ``base`` on ``samples``
    copies whose hidden state is redrawn (:func:`redrawn`; every option on the same draws). An
    option other than the first (the base's own) is taken only where it scores better than the
    first on the draws beyond doubt (its mean paired difference more than twice its standard
    error): the best such one by mean. The first where nothing can be drawn yet."""
    if len(options) < 2:
        return 0
    sign = 1.0 if lower else -1.0
    scores = np.zeros((samples, len(options)))
    for s in range(samples):
        draw = redrawn(core, rng)
        if draw is None:
            return 0
        for i, step in enumerate(options):
            trial = draw.copy()
            step(trial)
            scores[s, i] = sign * value(play(trial, base, slots), metric)
    diff = scores[:, 1:] - scores[:, :1]
    mean = diff.mean(axis=0)
    error = diff.std(axis=0, ddof=1) / np.sqrt(samples) if samples > 1 else np.zeros_like(mean)
    sure = np.flatnonzero(mean + 2.0 * error < 0.0)
    return 0 if sure.size == 0 else int(sure[np.argmin(mean[sure])]) + 1


def start(job: int | None) -> Step:
    """Start ``job`` where the placement component puts it (None: advance)."""
    return (lambda core: core.advance()) if job is None else (lambda core: core.start(job))


def ordering_jobs(
    core: Core, mine: int | None, visible: list[int], fits: list[bool], slots: int, width: int = WIDTH
) -> list[int | None]:
    """The ordering seat's options (None: advance): the base's own choice ``mine`` first, the
    next ``width`` visible jobs that can start, and "advance" where the mask allows it."""
    jobs: list[int | None] = [mine, *[j for j, f in zip(visible, fits, strict=True) if f and j != mine][:width]]
    if mine is not None and core.ordering_mask(fits, slots)[slots]:
        jobs.append(None)
    return jobs


def ordering_choice(
    core: Core, base: str, mine: int | None, visible: list[int], fits: list[bool], slots: int, width: int = WIDTH
) -> int | None:
    """The lookahead's job to start now (None: advance) among :func:`ordering_jobs`, each played
    on by ``base`` and scored by the figure of the core's reward (``envs.core.REWARDS``)."""
    jobs = ordering_jobs(core, mine, visible, fits, slots, width)
    reward = REWARDS[core.config.reward]
    return jobs[best(core, [start(j) for j in jobs], base, slots, reward.figure, reward.lower_better)]
