"""What a scheduler may learn about a dynamically adapting job, and Shockwave's estimates from it.

**What a policy is allowed to know** (ours, and enforced by tests that hide the rest):

- from ``JobSpec``: ``submit_time``, ``num_gpus``, ``model`` and ``speed_regimes`` (the speeds
  the job's batch-size schedule family can reach: public, like a profiled throughput table);
  never ``duration`` nor ``speed_phases``: together with the work they reveal the future;
- from ``JobState``: ``work_done`` and ``work_total`` (training progress, like Shockwave's
  epochs done out of the epochs asked for), and ``rate``, the job's current speed;
- ``view.rate``: the speed at the job's initial batch on an allocation. Their ratio is the job's
  current speed regime: this is how the policy *sees* the regimes a job has been through.

:class:`RegimeObserver` records, at every decision point, the multiplier of each running job and
where in its work it was seen, as disjoint intervals of work position. A change seen between two
observations is located exactly when one change happened in between (the work done solves for
the time spent in each regime). The regime at a work position is a fact (phases follow work), so
what was seen stays valid after a preemption rewinds the job.

**Remaining time** (Shockwave's Dirichlet posterior over batch-size modes, ``JobMetaData``):
with regimes ``R`` (the declared ones plus any seen), observed work shares ``o_r`` and progress
``d``, the prior gives each regime ``1/|R|`` of a job (Shockwave: ``epochs/|modes|`` epochs),
the posterior concentration is ``1/|R| + o_r``; its mean share of the whole job, less what was
already seen, is what is left in regime ``r``; these are rescaled to the work left ``1 - d``.
The remaining time at the requested allocation is ``W * sum_r q_r / r`` (work is measured in
seconds at the initial speed on the requested GPUs).

**Fair finish time** (Shockwave's ``finish_time_uniform_share``): whenever the set of jobs
changes, ``F = submit + (isolated time of the work done + remaining time) / share`` with
``share = min(1, GPUs / jobs)`` is appended to the job's series; ``F_hat`` is the time-weighted
average of the series (each value weighted by how long it was the latest), mixed with the latest
value by momentum: ``F_hat = m * average + (1 - m) * latest`` (Shockwave: m = 0.9).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs.sim.policy import ClusterView, JobStatus

SNAP = 0.02  # a seen multiplier within 2% of a declared regime is that regime


@dataclass
class _Belief:
    """Policy-private record of one job."""

    intervals: list[tuple[float, float, float]] = field(default_factory=list)  # (from, to, mult)
    last: tuple[float, float, float, int] | None = None  # (time, work, mult, preemptions)
    mult: float = 1.0  # the latest multiplier seen
    series: list[tuple[float, float]] = field(default_factory=list)  # (time, fair finish)


class RegimeObserver:
    """Per-job beliefs built only from what a policy may know (module docstring)."""

    def __init__(self) -> None:
        self._b: dict[int, _Belief] = {}

    def belief(self, job: int) -> _Belief:
        b = self._b.get(job)
        if b is None:
            b = self._b[job] = _Belief()
        return b

    def forget(self, job: int) -> None:
        self._b.pop(job, None)

    # ------------------------------------------------------------------ observing
    def observe(self, view: ClusterView) -> None:
        """Record the current regime of every running job."""
        now = view.now
        for j in tuple(view.running):
            if view.status_of(j) != JobStatus.RUNNING:
                continue
            st = view.state(j)
            if st.gpu_type is None or st.workers == 0:
                continue
            nservers = len({s for s, _ in st.base} | {s for s, _ in st.flex})
            base = view.rate(j, st.workers, nservers, st.gpu_type)
            if base <= 0.0 or st.rate <= 0.0:
                continue
            m = self._snap(view, j, st.rate / base)
            b = self.belief(j)
            w = st.work_done
            started = st.restarting_until if st.restarting_until == st.restarting_until else now
            if b.last is not None and b.last[3] == st.preemptions and w >= b.last[1]:
                t0, w0, m0, _ = b.last
                tau = max(0.0, now - max(t0, started))
                self._add_span(b, w0, w, m0, m, base, tau)
            else:
                # first sight in this stint: it resumed at w - rate * (time since its restart)
                w0 = max(0.0, w - st.rate * max(0.0, now - started))
                self._add(b, w0, w, m)
            b.last = (now, w, m, st.preemptions)
            b.mult = m

    def _snap(self, view: ClusterView, job: int, m: float) -> float:
        for r in view.job(job).speed_regimes:
            if abs(m / r - 1.0) <= SNAP:
                return r
        return round(m, 6)

    def _add_span(self, b: _Belief, w0: float, w1: float, m0: float, m1: float, base: float, tau: float) -> None:
        if m0 == m1 or w1 <= w0:
            self._add(b, w0, w1, m1)
            return
        # one change in between: dw = m0 * base * a + m1 * base * (tau - a)
        a = (w1 - w0 - m1 * base * tau) / ((m0 - m1) * base)
        a = min(max(a, 0.0), tau)
        wb = min(max(w0 + m0 * base * a, w0), w1)
        self._add(b, w0, wb, m0)
        self._add(b, wb, w1, m1)

    @staticmethod
    def _add(b: _Belief, w0: float, w1: float, m: float) -> None:
        if w1 <= w0:
            return
        iv = b.intervals
        if iv and iv[-1][2] == m and abs(iv[-1][1] - w0) <= 1e-9 * max(1.0, w0):
            iv[-1] = (iv[-1][0], w1, m)
        else:
            iv.append((w0, w1, m))

    # ------------------------------------------------------------------ estimates
    def shares(self, job: int, upto: float) -> dict[float, float]:
        """Work seen in each regime over positions ``[0, upto]`` (each position once)."""
        out: dict[float, float] = {}
        covered = 0.0
        for a, c, m in sorted(self.belief(job).intervals):
            lo, hi = max(a, covered), min(c, upto)
            if hi > lo:
                out[m] = out.get(m, 0.0) + hi - lo
            covered = max(covered, min(c, upto))
        return out

    def estimate(self, view: ClusterView, job: int) -> tuple[float, float, float]:
        """(progress fraction, remaining seconds, isolated seconds of the work done)."""
        st = view.state(job)
        return dirichlet_estimate(
            st.work_total,
            st.work_done,
            self.shares(job, st.work_done),
            view.job(job).speed_regimes,
            self.belief(job).mult,
        )

    def record_fair_finish(self, job: int, now: float, value: float) -> None:
        self.belief(job).series.append((now, value))

    def fair_finish(self, job: int, now: float, momentum: float) -> float:
        return smoothed(self.belief(job).series, now, momentum)


def dirichlet_estimate(
    work_total: float,
    work_done: float,
    seen: dict[float, float],
    regimes: tuple[float, ...],
    current: float = 1.0,
) -> tuple[float, float, float]:
    """(progress, remaining seconds, isolated seconds done) from the Dirichlet posterior.

    ``seen``: work seen per multiplier; ``regimes``: the declared ones (empty: only 1.0 and what
    was seen); ``current``: the regime assumed for all remaining work if the posterior leaves
    none. Work is in seconds at multiplier 1 on the requested GPUs.
    """
    w = max(work_total, 1e-9)
    done = min(max(work_done, 0.0), w)
    d = done / w
    obs = {m: x / w for m, x in seen.items() if x > 0.0}
    rs = sorted(set(regimes or (1.0,)) | set(obs))
    alpha = 1.0 / len(rs)
    total = 1.0 + sum(obs.values())
    q = {r: max(0.0, (alpha + obs.get(r, 0.0)) / total - obs.get(r, 0.0)) for r in rs}
    left = 1.0 - d
    s = sum(q.values())
    if s <= 0.0:
        q, s = {current: 1.0}, 1.0
    remaining = w * sum(v * left / s / r for r, v in q.items())
    seen_total = sum(obs.values())
    iso_done = w * (sum(v / m for m, v in obs.items()) + max(0.0, d - seen_total))
    return d, remaining, iso_done


def smoothed(series: list[tuple[float, float]], now: float, momentum: float) -> float:
    """Shockwave's ``finish_time_momentumed_average`` on a (time, value) series."""
    if not series:
        raise ValueError("no fair finish time recorded")
    times = [t for t, _ in series] + [now]
    spans = [max(0.0, times[i + 1] - times[i]) for i in range(len(series))]
    total = sum(spans)
    avg = series[-1][1] if total <= 0.0 else sum(s * v for s, (_, v) in zip(spans, series, strict=True)) / total
    return momentum * avg + (1.0 - momentum) * series[-1][1]
