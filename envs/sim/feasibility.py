"""Which jobs can ever run: checked before a run starts, so no run reports figures over a
different set of jobs than it was given.

A job can run when one pool that the policy may use holds, on a single GPU type the job allows,
at least the GPUs it asks for (``num_gpus``: the size every policy can start it at; a job's
workers are all of one type, which the engine enforces, and every placement packs a job within
one pool). The pools are the training servers and, for a policy that borrows, the inference
servers that the demand curve ever offers on loan: all of them but those its lowest demand
still needs, headroom included (the noise-free curve, or the lowest value of a series; a job
that would fit only in a noise dip of demand counts as unrunnable). Failed servers come back, so
failures do not count.

:func:`unrunnable` lists the jobs that fail this, each with its reason; ``scenarios.build`` then
refuses the run or drops them, as the scenario's ``workload.unrunnable`` says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envs.sim.config import ConfigError
from envs.sim.inference import DemandCurve
from envs.sim.model import JobSpec, Pool, ServerSpec


class UnrunnableError(ConfigError):
    """A run whose workload holds jobs the cluster can never run (one sentence, see :func:`describe`)."""


@dataclass(frozen=True)
class Unrunnable:
    """A job that can never run. ``index``: its position in the job list; ``reason``: one clause
    (``"asks for 60 GPUs of one type among A100-40GB, V100-32GB, and ..."``); ``with_loans``: a
    policy that borrows can run it (only the training pool falls short)."""

    index: int
    name: str
    reason: str
    with_loans: bool


def loanable_servers(demand: DemandCurve | None) -> int:
    """The most inference servers the curve ever offers on loan at once."""
    if demand is None:
        return 0
    return max(0, demand.servers - demand.servers_needed(demand.lowest_utilization()))


def pool_capacity(
    servers: Sequence[ServerSpec], demand: DemandCurve | None, borrowing: bool
) -> dict[tuple[str, Pool], int]:
    """GPUs per (GPU type, pool) that a policy may ever use together (see the module docstring)."""
    cap: dict[tuple[str, Pool], int] = {}
    for s in servers:
        if s.pool == Pool.TRAINING:
            key: tuple[str, Pool] = (s.gpu_type.name, s.pool)
            cap[key] = cap.get(key, 0) + s.num_gpus
    loans = loanable_servers(demand) if borrowing else 0
    inference = sorted((s for s in servers if s.pool == Pool.INFERENCE), key=lambda s: -s.num_gpus)
    for s in inference[:loans]:  # the largest ones: an upper bound on what a loan can hold
        key = (s.gpu_type.name, s.pool)
        cap[key] = cap.get(key, 0) + s.num_gpus
    return cap


def unrunnable(
    jobs: Sequence[JobSpec], servers: Sequence[ServerSpec], demand: DemandCurve | None, borrowing: bool
) -> list[Unrunnable]:
    """The jobs no policy can run on ``servers`` (``borrowing``: the policy takes loans)."""
    usable = pool_capacity(servers, demand, borrowing)
    loaned = pool_capacity(servers, demand, True) if not borrowing else usable
    out = []
    fits: dict[tuple[int, frozenset[str] | None], bool] = {}
    for i, j in enumerate(jobs):
        key = (j.num_gpus, j.gpu_types)
        if key not in fits:
            fits[key] = _fits(j, usable)
        if fits[key]:
            continue
        types = "any GPU type" if j.gpu_types is None else "one type among " + ", ".join(sorted(j.gpu_types))
        best = max(((c, t, p) for (t, p), c in usable.items() if j.gpu_types is None or t in j.gpu_types), default=None)
        if best is None:
            have = "no pool it may use has such GPUs"
        else:
            c, t, p = best
            have = f"the most one pool it may use holds is {c} ({t}, {p.name.lower()})"
        with_loans = _fits(j, loaned)
        if with_loans:
            have += "; a policy that borrows could run it"
        out.append(
            Unrunnable(
                i,
                j.name,
                f"asks for {j.num_gpus} GPU{'s' if j.num_gpus > 1 else ''} of {types}, but {have}",
                with_loans,
            )
        )
    return out


def _fits(job: JobSpec, capacity: dict[tuple[str, Pool], int]) -> bool:
    return any(c >= job.num_gpus for (t, _), c in capacity.items() if job.gpu_types is None or t in job.gpu_types)


def describe(
    bad: Sequence[Unrunnable], total: int, lines: Sequence[int | None], trace: str, borrowing: bool, shown: int = 3
) -> str:
    """One sentence: how many jobs can never run, the first ``shown`` of them and why, and the
    way out. ``lines``: each job's line in ``trace`` (``None`` for synthetic jobs)."""
    where = f" of {trace}" if trace else ""
    who = "" if borrowing else " under a policy that never borrows inference servers"

    def row(b: Unrunnable) -> str:
        line = lines[b.index] if b.index < len(lines) else None
        return (f"line {line}, " if line is not None else "") + f"job {b.name!r} {b.reason}"

    first = "; ".join(row(b) for b in bad[:shown])
    more = f"; and {len(bad) - shown} more" if len(bad) > shown else ""
    way_out = "so nothing is left to run" if len(bad) == total else "drop them with --set workload.unrunnable=drop"
    return f"{len(bad)} of {total} jobs{where} can never run on this cluster{who}: {first}{more}; {way_out}."
