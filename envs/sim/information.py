"""What a policy may know about job durations: the information model (DESIGN section 2).

A scenario's ``information`` settings give one of three levels:

- ``clairvoyant``: the view shows each job's true work (today's simulators mostly do this).
- ``estimate``: each job carries a duration estimate drawn once, at submission, from a seeded
  error model: ``estimate = duration x exp(sigma x z + user_sigma x b_user)``, with ``z`` standard
  normal per job and ``b_user`` standard normal per user (the same for all of a user's jobs: some
  users over-estimate, some under-estimate). The view serves work totals and remaining work from
  the estimate; work done so far is progress, which a scheduler observes. A job that runs past its
  estimate has it doubled (as often as needed), so its remaining estimate stays positive (ours).
- ``none``: no duration information at all: the view reports work totals, work done and remaining
  work as ``nan``; attained service (GPU-seconds held) and the queue's history are what is left.

Default ``sigma`` = 1.0 is our assumption, stated as such: a multiplicative log-normal error whose
median size is a factor of exp(0.674) = 1.96, and one estimate in six is off by more than e = 2.7.
That is the order of the errors reported for user-supplied run-time estimates (Tsafrir, Etsion and
Feitelson, TPDS 2007: most estimates are several times too long) and of history-based predictions
of DL job durations (Helios, SC'21, and Lucid, ASPLOS'23, report large errors for jobs without a
recurring history). ``benchmarks/estimate_error.py`` sweeps sigma.

Latent machine speed factors are never shown, at any level: the view's servers report a nominal
speed of 1; only what job progress reveals (a running job's observed rate) hints at them. A policy
that may see the truth anyway is an *oracle* (``Scheduler.oracle``): its view is clairvoyant and
shows the machines' true speeds. Oracles measure headroom; they are never baselines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from envs.sim import libm
from envs.sim.model import JobSpec
from envs.sim.settings import Choice, Num, Settings

LEVELS = ("clairvoyant", "estimate", "none")


@dataclass(frozen=True)
class InformationConfig(Settings):
    """:param level: ``clairvoyant``, ``estimate`` or ``none`` (module docstring).
    :param sigma: standard deviation of a job's log estimate error (``estimate`` only).
    :param user_sigma: standard deviation of each user's shared log bias (``estimate`` only; 0 =
        no per-user bias)."""

    level: Annotated[str, Choice(LEVELS)] = "clairvoyant"
    sigma: Annotated[float, Num(ge=0, le=5)] = 1.0
    user_sigma: Annotated[float, Num(ge=0, le=5)] = 0.0


@dataclass(frozen=True)
class Knowledge:
    """What one run's policies may know: the level, and each job's estimate / true duration
    (all 1.0 unless the level is ``estimate``)."""

    level: str = "clairvoyant"
    factor: tuple[float, ...] = ()

    @property
    def clairvoyant(self) -> bool:
        return self.level == "clairvoyant"


def draw(config: InformationConfig, jobs: Sequence[JobSpec], rng: np.random.Generator) -> Knowledge:
    """The run's knowledge. Randomness (``estimate`` only): one standard normal per job, then one
    per distinct user in order of first appearance."""
    if config.level != "estimate":
        return Knowledge(config.level, (1.0,) * len(jobs))
    z = rng.standard_normal(len(jobs))
    users = list(dict.fromkeys(j.user for j in jobs))
    bias = dict(zip(users, rng.standard_normal(len(users)).tolist(), strict=True))
    log_err = config.sigma * z + config.user_sigma * np.array([bias[j.user] for j in jobs])
    return Knowledge("estimate", tuple(libm.exp(log_err).tolist()))


def estimated_total(estimate: float, done: float) -> float:
    """The estimate of a job's total work once ``done`` of it is done: doubled until it exceeds
    what is done (a job that outlives its estimate still has some work left to guess)."""
    while estimate <= done:
        estimate *= 2.0
    return estimate
