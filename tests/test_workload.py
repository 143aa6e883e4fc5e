"""Trace loading and validation, attribute sampling, the synthetic generator, write_trace."""

from __future__ import annotations

import itertools
import math
import os
import re
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.sim.model import GPU_TYPES, JobClass
from envs.sim.workload import (
    ANY_GPU_TYPE,
    ITP_GPU_DEMAND,
    MAX_SECONDS,
    PHILLY_GPU_DEMAND,
    AttributeSampler,
    SyntheticWorkload,
    TraceError,
    TraceRow,
    build_jobs,
    generate,
    load_trace,
    write_trace,
)

ITP_TRACE = Path(__file__).resolve().parents[1] / "envs" / "sim" / "data" / "traces" / "itp_cluster04_2000.csv"
GOOD = "job_id,submit_time_s,duration_s,num_gpus\na,0,100,1\nb,10,200,2\n"
FULL_HEADER = (
    "job_id,submit_time_s,duration_s,num_gpus,model_name,gpu_type,job_class,priority,"
    "min_gpus,max_gpus,deadline_s,grace_period_s,user,vc\n"
)


def _write(tmp_path: Path, content: str | bytes, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


# --------------------------------------------------------------------------------------------
# load_trace: bad input
# --------------------------------------------------------------------------------------------

# (content, max_gpus_per_job, line, column, words the message must hold)
BAD_ROWS = [
    pytest.param(GOOD + "c,abc,100,1\n", None, 4, "submit_time_s", "expected a number", id="non-numeric"),
    pytest.param(GOOD + "c,-1,100,1\n", None, 4, "submit_time_s", ">= 0", id="negative-submit"),
    pytest.param(GOOD + "c,5,-3,1\n", None, 4, "duration_s", "> 0", id="negative-duration"),
    pytest.param(GOOD + "c,5,0,1\n", None, 4, "duration_s", "> 0", id="zero-duration"),
    pytest.param(GOOD + "c,5,100,0\n", None, 4, "num_gpus", "positive integer, got '0'", id="zero-gpus"),
    pytest.param(GOOD + "c,5,100,1.5\n", None, 4, "num_gpus", "positive integer, got '1.5'", id="fractional-gpus"),
    pytest.param(GOOD + "c,5,100,-2\n", None, 4, "num_gpus", "positive integer", id="negative-gpus"),
    pytest.param(GOOD + "c,5,100,x\n", None, 4, "num_gpus", "positive integer", id="text-gpus"),
    pytest.param(GOOD + "c,5,100,\n", None, 4, "num_gpus", "empty cell", id="empty-gpus"),
    pytest.param(GOOD + "c,5,100,64\n", 32, 4, "num_gpus", "cluster has only 32 GPUs", id="too-many-gpus"),
    pytest.param(GOOD + "c,nan,100,1\n", None, 4, "submit_time_s", "finite", id="nan"),
    pytest.param(GOOD + "c,5,inf,1\n", None, 4, "duration_s", "finite", id="inf"),
    pytest.param(GOOD + "c,5,-inf,1\n", None, 4, "duration_s", "finite", id="minus-inf"),
    pytest.param(GOOD + "c,5,100\n", None, 4, "num_gpus", "3 fields but the header has 4", id="short-row"),
    pytest.param(GOOD + "c,5,100,1,x\n", None, 4, "#5", "5 fields but the header has 4", id="long-row"),
    pytest.param(GOOD + "a,5,100,1\n", None, 4, "job_id", "already appears on line 2", id="duplicate-id"),
    pytest.param(GOOD + ",5,100,1\n", None, 4, "job_id", "empty cell", id="empty-id"),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,min_gpus,max_gpus\nc,5,100,2,3,\n",
        None,
        2,
        "min_gpus",
        "more than num_gpus",
        id="min-above-num",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,min_gpus,max_gpus\nc,5,100,4,,2\n",
        None,
        2,
        "max_gpus",
        "less than num_gpus",
        id="max-below-num",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,min_gpus,max_gpus\nc,5,100,4,0,\n",
        None,
        2,
        "min_gpus",
        "positive integer",
        id="min-zero",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,job_class\na,0,1,1,te\nc,5,100,1,urgent\n",
        None,
        3,
        "job_class",
        "expected te or be",
        id="unknown-class",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,deadline_s\nc,50,100,1,40\n",
        None,
        2,
        "deadline_s",
        "absolute time",
        id="deadline-before-submit",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,grace_period_s\nc,50,100,1,-1\n",
        None,
        2,
        "grace_period_s",
        ">= 0",
        id="negative-grace",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,priority\nc,50,100,1,high\n",
        None,
        2,
        "priority",
        "integer",
        id="text-priority",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,gpu_type\nc,50,100,1,A||B\n",
        None,
        2,
        "gpu_type",
        "separated by '|'",
        id="empty-gpu-type-name",
    ),
    pytest.param(
        "job_id,submit_time_s,duration_s,num_gpus,num_gpus\nc,50,100,1,1\n",
        None,
        1,
        "num_gpus",
        "twice",
        id="column-twice",
    ),
]


@pytest.mark.parametrize(("content", "max_gpus", "line", "column", "words"), BAD_ROWS)
def test_bad_cell_names_file_line_and_column(
    tmp_path: Path, content: str, max_gpus: int | None, line: int, column: str, words: str
) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(TraceError) as info:
        load_trace(path, max_gpus_per_job=max_gpus)
    message = str(info.value)
    assert f"trace.csv, line {line}, column {column}:" in message
    assert words in message
    assert message.endswith(".")
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.csv: no such file\."):
        load_trace(tmp_path / "nope.csv")


def test_directory_is_not_a_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"trace\.csv: the file is empty \(0 bytes\)"):
        load_trace(_write(tmp_path, b""))


def test_blank_lines_only(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"trace\.csv: the file holds no header row"):
        load_trace(_write(tmp_path, "\n\n  \n"))


def test_header_without_rows(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"trace\.csv: the file has a header but no jobs\."):
        load_trace(_write(tmp_path, "job_id,submit_time_s,duration_s,num_gpus\n\n"))


def test_png_is_not_a_trace(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64))
    with pytest.raises(TraceError, match=r"trace\.png, line 3: contains a NUL byte"):
        load_trace(_write(tmp_path, png, "trace.png"))
    with pytest.raises(TraceError, match=r"sig\.png, line 1: not UTF-8 text \(byte 0x89 at offset 0\)"):
        load_trace(_write(tmp_path, png[:8], "sig.png"))


def test_non_utf8_names_the_line(tmp_path: Path) -> None:
    data = GOOD.encode() + b"\xff\xfe,1,1,1\n"
    with pytest.raises(TraceError, match=r"trace\.csv, line 4: not UTF-8 text \(byte 0xff"):
        load_trace(_write(tmp_path, data))


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(tmp_path: Path, seed: int) -> None:
    junk = np.random.default_rng(seed).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    with pytest.raises(TraceError, match=r"^.*junk\.bin"):
        load_trace(_write(tmp_path, junk, "junk.bin"))


@pytest.mark.parametrize(
    ("header", "missing"),
    [
        ("job_id,submit_time_s,num_gpus", "duration_s"),
        ("job_id,num_gpus", "submit_time_s, duration_s"),
        ("id,submit,duration,gpus", "job_id, submit_time_s, duration_s, num_gpus"),
    ],
)
def test_missing_required_columns_are_named(tmp_path: Path, header: str, missing: str) -> None:
    path = _write(tmp_path, header + "\n1,2,3\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 1: the header lacks the required column")
    assert missing in message


def test_max_gpus_per_job_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_gpus_per_job"):
        load_trace(_write(tmp_path, GOOD), max_gpus_per_job=0)


# --------------------------------------------------------------------------------------------
# load_trace: good input
# --------------------------------------------------------------------------------------------


def test_shipped_trace_loads() -> None:
    rows = load_trace(ITP_TRACE, max_gpus_per_job=32)
    assert len(rows) == 2000
    assert rows[0].submit_time == 0.0
    assert Counter(row.num_gpus for row in rows) == {1: 1608, 2: 10, 4: 7, 8: 343, 16: 1, 32: 31}
    assert all(a.submit_time <= b.submit_time for a, b in itertools.pairwise(rows))
    assert rows[0].name == "f9350fc2-cb2c-da3e-ad6b-2d45e2dd8660"
    assert rows[0].duration == 16123.0 and rows[0].model == "resnet50"
    assert {row.model for row in rows} == {"resnet50", "vgg16", "gpt2", "inception3", "bert", "deepspeech2"}
    assert all(row.gpu_types is None and row.job_class is None and row.user is None for row in rows)
    durations = sorted(row.duration for row in rows)
    assert float(np.median(durations)) == 8039.0


def test_shipped_trace_is_too_big_for_a_small_cluster() -> None:
    with pytest.raises(TraceError, match=r"column num_gpus: the job asks for 16 GPUs but the cluster has only 8"):
        load_trace(ITP_TRACE, max_gpus_per_job=8)


def test_unsorted_rows_are_sorted_stably(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id,submit_time_s,duration_s,num_gpus\nw,50,1,1\nx,10,1,1\ny,0,1,1\nz,10,1,1\n")
    assert [row.name for row in load_trace(path)] == ["y", "x", "z", "w"]


def test_every_column_is_parsed(tmp_path: Path) -> None:
    content = (
        FULL_HEADER.upper().replace("JOB_ID", "Job_Id")
        + "j1, 5 ,100.5,8.0,bert,V100-32GB|T4-16GB,TE,-3,4,16,900.25,60,alice,vc7\n"
        + "j2,1,2,1,,,,,,,,,,\n"
    )
    rows = load_trace(_write(tmp_path, "\ufeff" + content))
    assert rows == [
        TraceRow(name="j2", submit_time=1.0, duration=2.0, num_gpus=1, gpu_types=ANY_GPU_TYPE),
        TraceRow(
            name="j1",
            submit_time=5.0,
            duration=100.5,
            num_gpus=8,
            model="bert",
            gpu_types=frozenset({"V100-32GB", "T4-16GB"}),
            job_class=JobClass.TE,
            priority=-3,
            min_gpus=4,
            max_gpus=16,
            deadline=900.25,
            grace_period=60.0,
            user="alice",
            vc="vc7",
        ),
    ]


def test_unknown_columns_are_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, "status,job_id,submit_time_s,duration_s,num_gpus,\nPass,a,0,1,1,\n")
    assert load_trace(path) == [TraceRow(name="a", submit_time=0.0, duration=1.0, num_gpus=1)]


def test_quoted_cells_and_crlf(tmp_path: Path) -> None:
    path = _write(tmp_path, 'job_id,submit_time_s,duration_s,num_gpus,user\r\n"a,1",0,1,1,"x ""y"""\r\n')
    assert load_trace(path) == [TraceRow(name="a,1", submit_time=0.0, duration=1.0, num_gpus=1, user='x "y"')]


# --------------------------------------------------------------------------------------------
# Hypothesis: round trip and single-cell corruption
# --------------------------------------------------------------------------------------------

_TEXT = st.text(alphabet=string.ascii_letters + string.digits + ' ,"-_.|\n', min_size=1, max_size=12).filter(
    lambda s: s == s.strip()
)
_GPU_NAME = st.sampled_from(sorted(GPU_TYPES))  # a trace may name only known types (or map its own)


@st.composite
def _rows(draw: st.DrawFn) -> list[TraceRow]:
    n = draw(st.integers(1, 8))
    names = draw(st.lists(_TEXT, min_size=n, max_size=n, unique=True))
    has_gpu_column = draw(st.booleans())
    rows = []
    for name in names:
        submit = draw(st.floats(0.0, MAX_SECONDS, allow_nan=False))
        num = draw(st.integers(1, 64))
        lo = draw(st.none() | st.integers(1, num))
        hi = draw(st.none() | st.integers(num, 128))
        gpu_types = draw(st.frozensets(_GPU_NAME, max_size=3)) if has_gpu_column else None  # empty frozenset = any
        slack = draw(st.none() | st.floats(1e-3, 1e6))
        rows.append(
            TraceRow(
                name=name,
                submit_time=submit,
                duration=draw(st.floats(min_value=1e-6, max_value=1e7, allow_nan=False)),
                num_gpus=num,
                model=draw(st.none() | _TEXT),
                gpu_types=gpu_types,
                job_class=draw(st.none() | st.sampled_from(JobClass)),
                priority=draw(st.none() | st.integers(-(10**6), 10**6)),
                min_gpus=lo,
                max_gpus=hi,
                deadline=None if slack is None else submit + slack,
                grace_period=draw(st.none() | st.floats(0.0, 1e4)),
                user=draw(st.none() | _TEXT),
                vc=draw(st.none() | _TEXT),
            )
        )
    return rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows())
def test_round_trip_random_rows(tmp_path: Path, rows: list[TraceRow]) -> None:
    path = write_trace(rows, tmp_path / "rt.csv")
    assert load_trace(path) == sorted(rows, key=lambda row: row.submit_time)


_CORRUPT = {
    "submit_time_s": ["-1", "x", "nan", "", "inf", "1e400"],
    "duration_s": ["0", "-5", "inf", "abc", "", "-0.0"],
    "num_gpus": ["0", "1.5", "-2", "x", "", "nan"],
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 6),
    data=st.data(),
)
def test_single_corrupt_cell_is_located(tmp_path: Path, n: int, data: st.DataObject) -> None:
    lines = [[f"job{i}", str(10 * i), "100", "2"] for i in range(n)]
    row = data.draw(st.integers(0, n - 1))
    column = data.draw(st.sampled_from(sorted(_CORRUPT)))
    value = data.draw(st.sampled_from(_CORRUPT[column]))
    lines[row][1 + ["submit_time_s", "duration_s", "num_gpus"].index(column)] = value
    text = "job_id,submit_time_s,duration_s,num_gpus\n" + "".join(",".join(cells) + "\n" for cells in lines)
    path = _write(tmp_path, text, "corrupt.csv")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert f"corrupt.csv, line {row + 2}, column {column}:" in str(info.value)


# --------------------------------------------------------------------------------------------
# write_trace
# --------------------------------------------------------------------------------------------


def test_write_trace_only_writes_given_columns(tmp_path: Path) -> None:
    rows = [TraceRow("a", 0.0, 1.5, 1, model="bert"), TraceRow("b", 0.1, 2.0, 2)]
    path = write_trace(rows, tmp_path / "t.csv")
    assert path.read_text().splitlines() == [
        "job_id,submit_time_s,duration_s,num_gpus,model_name",
        "a,0.0,1.5,1,bert",
        "b,0.1,2.0,2,",
    ]


def test_write_trace_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.csv"
    target.write_text("old\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_trace([TraceRow("a", 0.0, 1.0, 1)], target)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
    monkeypatch.undo()
    write_trace([TraceRow("a", 0.0, 1.0, 1)], target)
    assert load_trace(target) == [TraceRow("a", 0.0, 1.0, 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.mark.parametrize(
    "rows",
    [
        [TraceRow("a", 0.0, 1.0, 1), TraceRow("a", 1.0, 1.0, 1)],
        [TraceRow(" ", 0.0, 1.0, 1)],
        [TraceRow("a", 0.0, 1.0, 1, gpu_types=frozenset({"A|B"}))],
        [TraceRow("a", 0.0, 1.0, 1, gpu_types=frozenset({"T4"})), TraceRow("b", 0.0, 1.0, 1)],
    ],
    ids=["duplicate-name", "blank-name", "pipe-in-type", "gpu-type-mixed-with-unknown"],
)
def test_write_trace_refuses_what_the_schema_cannot_hold(tmp_path: Path, rows: list[TraceRow]) -> None:
    with pytest.raises(ValueError):
        write_trace(rows, tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()


# --------------------------------------------------------------------------------------------
# build_jobs / AttributeSampler
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def itp_rows() -> list[TraceRow]:
    return load_trace(ITP_TRACE, max_gpus_per_job=32)


def test_build_jobs_is_deterministic(itp_rows: list[TraceRow]) -> None:
    sampler = AttributeSampler(te_fraction=0.5, deadline_fraction=0.5)
    a = build_jobs(itp_rows, sampler, np.random.default_rng(7), 32)
    b = build_jobs(itp_rows, sampler, np.random.default_rng(7), 32)
    c = build_jobs(itp_rows, sampler, np.random.default_rng(8), 32)
    assert a == b
    assert a != c
    assert [job.job_id for job in a] == list(range(2000))
    assert [job.name for job in a] == [row.name for row in itp_rows]


def test_build_jobs_sorts_and_numbers_by_submit_time() -> None:
    rows = [TraceRow("late", 10.0, 1.0, 1), TraceRow("early", 0.0, 1.0, 1), TraceRow("tie", 10.0, 1.0, 1)]
    jobs = build_jobs(rows, AttributeSampler(), np.random.default_rng(0), 8)
    assert [(job.job_id, job.name) for job in jobs] == [(0, "early"), (1, "late"), (2, "tie")]


def test_any_gpu_share_near_21_percent(itp_rows: list[TraceRow]) -> None:
    jobs = build_jobs(itp_rows, AttributeSampler(), np.random.default_rng(1), 32)
    share = sum(job.gpu_types is None for job in jobs) / len(jobs)
    assert abs(share - 0.21) < 0.04
    assert {job.gpu_types for job in jobs if job.gpu_types is not None} == {frozenset({"V100-32GB"})}


def test_elastic_only_for_elastic_models(itp_rows: list[TraceRow]) -> None:
    sampler = AttributeSampler()
    jobs = build_jobs(itp_rows, sampler, np.random.default_rng(2), 32)
    for job in jobs:
        assert 1 <= job.min_gpus <= job.num_gpus <= job.max_gpus <= 32
        if job.model in sampler.elastic_models:
            assert job.elastic
            assert job.min_gpus == max(1, job.num_gpus // 2)
            assert job.max_gpus == min(32, 2 * job.num_gpus)
        else:
            assert job.min_gpus == job.num_gpus == job.max_gpus
    assert any(job.elastic for job in jobs) and not all(job.elastic for job in jobs)
    none = build_jobs(itp_rows, AttributeSampler(elastic_fraction=0.0), np.random.default_rng(2), 32)
    assert not any(job.elastic for job in none)


def test_models_are_sampled_uniformly_when_missing() -> None:
    rows = [TraceRow(f"j{i}", float(i), 100.0, 1) for i in range(3000)]
    sampler = AttributeSampler()
    counts = Counter(job.model for job in build_jobs(rows, sampler, np.random.default_rng(3), 8))
    assert set(counts) == set(sampler.models)
    assert all(abs(c / 3000 - 1 / 6) < 0.03 for c in counts.values())


def test_trace_columns_win_over_the_sampler() -> None:
    row = TraceRow(
        name="x",
        submit_time=10.0,
        duration=50.0,
        num_gpus=4,
        model="gpt2",
        gpu_types=frozenset({"T4-16GB"}),
        job_class=JobClass.BE,
        priority=5,
        min_gpus=2,
        max_gpus=64,
        deadline=99.0,
        grace_period=7.0,
        user="bob",
    )
    greedy = AttributeSampler(
        elastic_models=frozenset({"gpt2"}),
        any_gpu_fraction=1.0,
        te_fraction=1.0,
        te_max_gpus=8,
        deadline_fraction=1.0,
    )
    (job,) = build_jobs([row], greedy, np.random.default_rng(0), 16)
    assert (job.model, job.gpu_types, job.job_class, job.priority) == (
        "gpt2",
        frozenset({"T4-16GB"}),
        JobClass.BE,
        5,
    )
    assert (job.min_gpus, job.num_gpus, job.max_gpus) == (2, 4, 16)  # max clamped to the cluster
    assert (job.deadline, job.grace_period, job.user) == (99.0, 7.0, "bob")


def test_trace_any_gpu_type_and_half_given_elastic_range() -> None:
    rows = [
        TraceRow("a", 0.0, 1.0, 4, gpu_types=ANY_GPU_TYPE, min_gpus=1),
        TraceRow("b", 0.0, 1.0, 4, model="resnet50", max_gpus=6),
    ]
    a, b = build_jobs(rows, AttributeSampler(any_gpu_fraction=0.0), np.random.default_rng(0), 8)
    assert a.gpu_types is None and (a.min_gpus, a.max_gpus) == (1, 4)
    assert b.gpu_types == frozenset({"V100-32GB"}) and (b.min_gpus, b.max_gpus) == (4, 6)


def test_a_new_column_does_not_change_the_other_draws(itp_rows: list[TraceRow]) -> None:
    sampler = AttributeSampler(te_fraction=0.7, deadline_fraction=0.4, te_max_duration=20000.0)
    bare = [TraceRow(r.name, r.submit_time, r.duration, r.num_gpus) for r in itp_rows[:300]]
    typed = [TraceRow(r.name, r.submit_time, r.duration, r.num_gpus, gpu_types=frozenset({"T4-16GB"})) for r in bare]
    a = build_jobs(bare, sampler, np.random.default_rng(11), 32)
    b = build_jobs(typed, sampler, np.random.default_rng(11), 32)
    for x, y in zip(a, b, strict=True):
        assert y.gpu_types == frozenset({"T4-16GB"})
        assert (x.model, x.min_gpus, x.max_gpus, x.job_class, x.deadline, x.grace_period) == (
            y.model,
            y.min_gpus,
            y.max_gpus,
            y.job_class,
            y.deadline,
            y.grace_period,
        )


def test_te_only_among_small_short_jobs(itp_rows: list[TraceRow]) -> None:
    sampler = AttributeSampler(te_fraction=1.0, te_max_gpus=2, te_max_duration=3600.0)
    jobs = build_jobs(itp_rows, sampler, np.random.default_rng(4), 32)
    for job in jobs:
        eligible = job.num_gpus <= 2 and job.duration <= 3600.0
        assert (job.job_class == JobClass.TE) == eligible
    assert any(job.job_class == JobClass.TE for job in jobs)
    half = build_jobs(itp_rows, AttributeSampler(te_fraction=0.5), np.random.default_rng(4), 32)
    eligible_jobs = [j for j in half if j.num_gpus <= 2 and j.duration <= 3600.0]
    share = sum(j.job_class == JobClass.TE for j in eligible_jobs) / len(eligible_jobs)
    assert 0.35 < share < 0.65
    assert all(
        j.job_class == JobClass.BE for j in build_jobs(itp_rows, AttributeSampler(), np.random.default_rng(4), 32)
    )


def test_deadlines_and_grace_periods(itp_rows: list[TraceRow]) -> None:
    sampler = AttributeSampler(deadline_fraction=1.0, deadline_slack=(1.5, 2.0), grace_period=(10.0, 20.0))
    for job in build_jobs(itp_rows, sampler, np.random.default_rng(5), 32):
        assert job.deadline is not None
        slack = (job.deadline - job.submit_time) / job.duration
        assert 1.5 - 1e-9 <= slack <= 2.0 + 1e-9
        assert 10.0 <= job.grace_period <= 20.0
    assert all(j.deadline is None for j in build_jobs(itp_rows, AttributeSampler(), np.random.default_rng(5), 32))


def test_build_jobs_keeps_jobs_bigger_than_the_cluster_as_asked(itp_rows: list[TraceRow]) -> None:
    """The cluster's feasibility check (tests/test_feasibility.py) decides about them, not build_jobs."""
    jobs = build_jobs(itp_rows, AttributeSampler(elastic_fraction=0.0), np.random.default_rng(0), 8)
    big = [j for j in jobs if j.num_gpus > 8]
    assert big and all(j.min_gpus == j.max_gpus == j.num_gpus for j in big)
    assert all(j.max_gpus <= 8 for j in jobs if j.num_gpus <= 8)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"any_gpu_fraction": 1.5},
        {"te_fraction": -0.1},
        {"elastic_min_ratio": 0.0},
        {"elastic_max_ratio": 0.5},
        {"deadline_slack": (3.0, 1.0)},
        {"grace_period": (-1.0, 5.0)},
        {"models": ()},
    ],
)
def test_sampler_rejects_bad_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="AttributeSampler"):
        AttributeSampler(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# generate
# --------------------------------------------------------------------------------------------


def test_generate_is_deterministic() -> None:
    workload = SyntheticWorkload(num_jobs=500, diurnal_amplitude=0.4)
    assert generate(workload, np.random.default_rng(3)) == generate(workload, np.random.default_rng(3))
    assert generate(workload, np.random.default_rng(3)) != generate(workload, np.random.default_rng(4))


def test_generate_statistics() -> None:
    rows = generate(SyntheticWorkload(num_jobs=20000), np.random.default_rng(0))
    assert len(rows) == 20000
    durations = np.array([row.duration for row in rows])
    assert abs(np.median(durations) / 8039.0 - 1.0) < 0.25  # the shipped ITP sample's median
    assert abs(np.percentile(durations, 90) / 18950.0 - 1.0) < 0.25
    assert np.percentile(durations, 99) > 5 * np.median(durations)  # heavy tail
    assert durations.min() >= 600.0 and durations.max() <= 7 * 86400.0
    assert np.all(durations == np.round(durations))
    counts = Counter(row.num_gpus for row in rows)
    for gpus, p in PHILLY_GPU_DEMAND:
        assert abs(counts[gpus] / 20000 - p) < 0.01
    submits = np.array([row.submit_time for row in rows])
    assert np.all(np.diff(submits) >= 0)
    mean_gap = float(np.mean(np.diff(submits)))
    assert abs(mean_gap / (3600.0 / 17.0) - 1.0) < 0.05
    assert len({row.name for row in rows}) == 20000


def test_generate_itp_gpu_mix() -> None:
    rows = generate(SyntheticWorkload(num_jobs=20000, gpu_demand=ITP_GPU_DEMAND), np.random.default_rng(1))
    counts = Counter(row.num_gpus for row in rows)
    assert abs(counts[1] / 20000 - 0.804) < 0.01
    assert abs(counts[8] / 20000 - 0.1715) < 0.01


def test_generate_over_a_window() -> None:
    rows = generate(SyntheticWorkload(num_jobs=3000, duration_days=2.0), np.random.default_rng(2))
    submits = [row.submit_time for row in rows]
    assert len(rows) == 3000
    assert min(submits) >= 0.0 and max(submits) < 2 * 86400.0
    assert submits == sorted(submits)


@pytest.mark.parametrize("duration_days", [None, 5.0])
def test_generate_diurnal_cycle(duration_days: float | None) -> None:
    workload = SyntheticWorkload(
        num_jobs=20000, duration_days=duration_days, diurnal_amplitude=0.6, diurnal_peak_hour=14.0
    )
    rows = generate(workload, np.random.default_rng(6))
    assert len(rows) == 20000
    hours = np.bincount([int(row.submit_time % 86400 // 3600) for row in rows], minlength=24)
    # rate(14h) / rate(2h) = 1.6 / 0.4 = 4
    assert hours[14] > 2.5 * hours[2]
    assert int(np.argmax(hours)) in range(11, 18)


def test_generate_round_trips_through_write_trace(tmp_path: Path) -> None:
    rows = generate(SyntheticWorkload(num_jobs=1000, diurnal_amplitude=0.3), np.random.default_rng(9))
    assert load_trace(write_trace(rows, tmp_path / "syn.csv")) == rows


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_jobs": 0},
        {"duration_days": 0.0},
        {"arrival_rate_per_hour": 0.0},
        {"diurnal_amplitude": 1.0},
        {"gpu_demand": ((1, 0.5),)},
        {"gpu_demand": ((0, 1.0),)},
        {"duration_mixture": ((0.5, 9.0, 1.0),)},
        {"min_duration_s": 0.0},
    ],
)
def test_workload_rejects_bad_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="SyntheticWorkload"):
        SyntheticWorkload(**kwargs)  # type: ignore[arg-type]


def test_generated_jobs_build() -> None:
    rows = generate(SyntheticWorkload(num_jobs=300), np.random.default_rng(10))
    jobs = build_jobs(rows, AttributeSampler(), np.random.default_rng(10), 32)
    assert len(jobs) == 300
    assert all(math.isfinite(job.duration) and job.duration > 0 for job in jobs)


def test_set_parses_pairs_and_reports_a_dataclass_rejecting_its_value():
    from envs.sim.config import ConfigError
    from envs.sim.scenarios import get

    w = get("dynamic", {"workload.synthetic.gpu_demand": "1:0.75;2:0.25"}).workload.synthetic
    assert w.gpu_demand == ((1, 0.75), (2, 0.25))
    assert get("dynamic", {"dynamic.accordion_first_critical": "0.1;0.2"}).dynamic.accordion_first_critical == (
        0.1,
        0.2,
    )
    with pytest.raises(
        ConfigError, match=re.escape("gpu_demand=1:0.75;2:0.2': SyntheticWorkload.gpu_demand probabilities")
    ):
        get("dynamic", {"workload.synthetic.gpu_demand": "1:0.75;2:0.2"})
    with pytest.raises(ConfigError, match="expects 2 values, got '1'"):
        get("dynamic", {"workload.synthetic.gpu_demand": "1;2"})


# --------------------------------------------------------------------------------------------
# Job names, templates and recurring synthetic users (issue 17)
# --------------------------------------------------------------------------------------------


def test_job_name_is_read_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time_s,duration_s,num_gpus,user,job_name\na,0,100,1,alice,train.py\nb,5,50,2,bob,\n")
    rows = load_trace(path)
    assert [(r.user, r.job_name) for r in rows] == [("alice", "train.py"), ("bob", None)]
    rows = [*rows, TraceRow("c", 9.0, 20.0, 1, job_name='bert "large", lr=1e-4')]
    out = tmp_path / "out.csv"
    write_trace(rows, out)
    assert out.read_text().splitlines()[0] == "job_id,submit_time_s,duration_s,num_gpus,user,job_name"
    assert load_trace(out) == rows
    write_trace([TraceRow("a", 0.0, 1.0, 1, user="u")], out)
    assert "job_name" not in out.read_text()


def test_build_jobs_sets_user_and_template_and_a_template_keeps_its_model() -> None:
    named = [
        TraceRow(f"j{i}", float(i), 100.0, 1, user=f"u{i % 2}", job_name=None if i % 3 == 0 else f"t{i % 4}")
        for i in range(60)
    ]
    sampler = AttributeSampler(any_gpu_fraction=0.5)
    jobs = build_jobs(named, sampler, np.random.default_rng(4), 32)
    assert [(j.user, j.template) for j in jobs] == [(r.user, r.job_name or "") for r in named]
    models: dict[tuple[str, str], set[str]] = {}
    for job in jobs:
        if job.template:
            models.setdefault((job.user, job.template), set()).add(job.model)
    assert len(models) == 4 and all(len(m) == 1 for m in models.values())
    # Without job names every job keeps its own draw; the other attributes do not move.
    plain = build_jobs(
        [TraceRow(r.name, r.submit_time, r.duration, r.num_gpus, user=r.user) for r in named],
        sampler,
        np.random.default_rng(4),
        32,
    )
    assert len({j.model for j in plain}) > 1
    for a, b, row in zip(jobs, plain, named, strict=True):
        assert b.template == ""
        assert (a.gpu_types, a.job_class, a.grace_period, a.deadline) == (
            b.gpu_types,
            b.job_class,
            b.grace_period,
            b.deadline,
        )
        if row.job_name is None:
            assert a.model == b.model


def _rows_digest(rows: list[TraceRow]) -> str:
    import hashlib

    h = hashlib.sha256()
    for r in rows:
        h.update(f"{r.name},{r.submit_time.hex()},{float(r.duration).hex()},{r.num_gpus};".encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(
    ("workload", "seed", "digest"),
    [
        # Digests of the rows the generator drew before recurrence existed (same seeds).
        (SyntheticWorkload(num_jobs=500), 0, "de9f4475afddd6f9"),
        (SyntheticWorkload(num_jobs=500), 1, "f16bc0a104079a2f"),
        (SyntheticWorkload(num_jobs=500), 7, "c1bfc022a074531c"),
        (SyntheticWorkload(num_jobs=500, diurnal_amplitude=0.5), 7, "0c3bb6c68a6dfb49"),
        (
            SyntheticWorkload(num_jobs=500, duration_days=3.0, diurnal_amplitude=0.7, gpu_demand=ITP_GPU_DEMAND),
            12345,
            "cb9615747bfb03dc",
        ),
    ],
)
def test_generate_without_recurrence_draws_what_it_drew_before(
    workload: SyntheticWorkload, seed: int, digest: str
) -> None:
    rows = generate(workload, np.random.default_rng(seed))
    assert _rows_digest(rows) == digest
    assert all(r.user is None and r.job_name is None for r in rows)


def _explained(rows: list[TraceRow]) -> float:
    """Adjusted one-way ANOVA R^2 of ln(duration) by job name (corrects the upward bias of the
    plain R^2, about (templates - 1) / jobs)."""
    index: dict[str | None, int] = {}
    group = np.array([index.setdefault(r.job_name, len(index)) for r in rows])
    y = np.log([r.duration for r in rows])
    count, total = np.bincount(group), np.bincount(group, y)
    between = float((count * (total / count - y.mean()) ** 2).sum())
    overall = float(((y - y.mean()) ** 2).sum())
    n, k = len(y), len(count)
    return 1.0 - ((overall - between) / (n - k)) / (overall / (n - 1))


@pytest.mark.parametrize("r2", [0.05, 0.3, 0.7])
def test_the_template_explains_template_r2_of_the_log_duration_variance(r2: float) -> None:
    # 0.05 lies below the share the mixture's components alone explain (0.117): the other branch.
    workload = SyntheticWorkload(num_jobs=60_000, num_users=200, activity_exponent=0.5, template_r2=r2)
    assert abs(_explained(generate(workload, np.random.default_rng(1))) - r2) < 0.03


def test_template_r2_one_fixes_a_templates_duration_and_gpus() -> None:
    rows = generate(SyntheticWorkload(num_jobs=3000, num_users=30, template_r2=1.0), np.random.default_rng(3))
    seen: dict[str | None, set[tuple[float, int]]] = {}
    for r in rows:
        seen.setdefault(r.job_name, set()).add((r.duration, r.num_gpus))
    assert len(seen) > 20 and all(len(v) == 1 for v in seen.values())
    assert len({v.pop() for v in seen.values()}) > 10


def test_recurrence_keeps_the_gpu_and_duration_marginals() -> None:
    from envs.sim.scenarios.base import mean_gpu_seconds
    from envs.sim.workload import ITP_DURATION_MIXTURE

    users, per_user, exponent, n = 1000, 5, 0.5, 200_000
    workload = SyntheticWorkload(
        num_jobs=n, num_users=users, templates_per_user=per_user, activity_exponent=exponent, template_r2=0.6
    )
    rows = generate(workload, np.random.default_rng(0))
    # Documented tolerance: the largest template's share (systematic placement), plus 4 sigma of
    # the jobs' own sampling.
    zipf = lambda k: 1.0 / sum(r**-exponent for r in range(1, k + 1))  # noqa: E731
    largest = zipf(users) * zipf(per_user)
    gpus = np.array([r.num_gpus for r in rows])
    for count, p in PHILLY_GPU_DEMAND:
        assert abs(float(np.mean(gpus == count)) - p) < largest + 4 * math.sqrt(p * (1 - p) / n), count
    durations = np.array([r.duration for r in rows])
    for x in (2000.0, 4000.0, 6800.0, 7900.0, 9000.0, 16000.0, 20000.0, 40000.0, 120000.0):
        cdf = sum(
            w * 0.5 * (1 + math.erf((math.log(x) - mu) / (s * math.sqrt(2)))) for w, mu, s in ITP_DURATION_MIXTURE
        )
        assert abs(float(np.mean(durations <= x)) - cdf) < largest + 4 * math.sqrt(cdf * (1 - cdf) / n), x
    # So the offered load the scenarios compute stays right (heavy tail: a looser bound).
    assert float(np.mean(gpus * durations)) == pytest.approx(mean_gpu_seconds(workload), rel=0.05)


def test_recurrence_is_seeded_and_leaves_arrivals_alone() -> None:
    on = SyntheticWorkload(num_jobs=400, num_users=20, duration_days=1.0, diurnal_amplitude=0.5)
    off = SyntheticWorkload(num_jobs=400, duration_days=1.0, diurnal_amplitude=0.5)
    a, b = generate(on, np.random.default_rng(5)), generate(on, np.random.default_rng(5))
    assert a == b and [r.user for r in a] == [r.user for r in b] and [r.job_name for r in a] == [r.job_name for r in b]
    assert a != generate(on, np.random.default_rng(6))
    assert [r.submit_time for r in a] == [r.submit_time for r in generate(off, np.random.default_rng(5))]
    assert all(r.job_name is not None and r.user is not None and r.job_name.startswith(f"{r.user}-t") for r in a)


def test_users_activity_is_zipf_as_documented() -> None:
    users, n = 100, 100_000
    rows = generate(SyntheticWorkload(num_jobs=n, num_users=users, activity_exponent=1.0), np.random.default_rng(2))
    counts = Counter(r.user for r in rows)
    harmonic = lambda k: sum(1.0 / r for r in range(1, k + 1))  # noqa: E731
    assert set(counts) <= {f"u{u}" for u in range(users)}
    for u in (0, 1, 4, 9):
        share = 1.0 / (u + 1) / harmonic(users)
        assert abs(counts[f"u{u}"] / n - share) < 4 * math.sqrt(share / n), u
    top5 = sum(c for _, c in counts.most_common(5)) / n
    assert top5 == pytest.approx(harmonic(5) / harmonic(users), abs=0.01)  # the docstring's 44%
    # Each user's templates in the same Zipf proportions.
    own = Counter(r.job_name for r in rows if r.user == "u0")
    assert own["u0-t0"] / own["u0-t1"] == pytest.approx(2.0, rel=0.1)
    flat = Counter(
        r.user
        for r in generate(
            SyntheticWorkload(num_jobs=n, num_users=users, activity_exponent=0.0), np.random.default_rng(2)
        )
    )
    assert max(flat.values()) / n < 2.0 / users


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_users": -1},
        {"templates_per_user": 0},
        {"activity_exponent": -0.5},
        {"template_r2": 1.5},
        {"template_r2": -0.1},
    ],
)
def test_recurrence_settings_are_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="SyntheticWorkload"):
        SyntheticWorkload(**kwargs)  # type: ignore[arg-type]
