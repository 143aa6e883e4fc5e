"""evaluate.py --trace on bad files: one sentence naming file, row and column; exit 2; nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

import evaluate

HEADER = "job_id,submit_time_s,duration_s,num_gpus\n"


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        ("job_id,submit_time_s,num_gpus\na,0,1\n", ["duration_s"]),  # missing column
        (HEADER + "a,0,100,1\nb,zero,100,1\n", ["line 3", "submit_time_s"]),  # non-numeric
        (HEADER + "a,0,100,1\nb,-5,100,1\n", ["line 3", "submit_time_s"]),  # negative
        (HEADER + "a,0,100,0\n", ["line 2", "num_gpus"]),  # zero GPUs
        (HEADER + "a,0,100,4096\n", ["line 2", "4096 GPUs", "never run"]),  # more GPUs than the cluster
        ("", ["empty"]),  # empty file
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", []),  # binary junk
    ],
)
def test_bad_trace_is_one_sentence_exit_2_and_writes_nothing(content, needles, tmp_path: Path, capsys):
    trace = tmp_path / "cluster.csv"
    if isinstance(content, bytes):
        trace.write_bytes(content)
    else:
        trace.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    assert evaluate.main(["--policies", "fifo", "--trace", str(trace), "--out", str(out)]) == 2
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("error:") and "cluster.csv" in text and "Traceback" not in text
    for needle in needles:
        assert needle in text, (needle, text)
    assert not out.exists()


def test_unknown_names_list_the_valid_ones(capsys):
    assert evaluate.main(["--policies", "nosuch"]) == 2
    text = capsys.readouterr().out
    assert "valid policies: " in text and "fifo" in text and "aryl" in text
    assert evaluate.main(["--scenario", "nosuch"]) == 2
    text = capsys.readouterr().out
    assert "valid scenarios: " in text and "loaning" in text
