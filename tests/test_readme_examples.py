"""The README's "Add a policy" and "Add a scenario" sections run as written: in a copy of the
repository, each section's Python file is saved where its first line says, and each of its
commands runs there (``.venv/bin/python`` being this interpreter's environment) and exits 0.
tests/test_readme_commands.py runs the README's other commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from readme_blocks import EXAMPLES, blocks, copy_repo, run, section, shell_lines


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("repo"))


@pytest.mark.parametrize("title", EXAMPLES)
def test_the_readme_example_runs_as_written(title: str, repo: Path):
    text = section(title)
    (code,) = blocks(text, "python")
    first = code.splitlines()[0]
    assert first.startswith("# ") and first.endswith(".py")
    target = repo / first[2:].strip()
    assert target.parent.is_dir() and not target.exists()  # a new file in an existing package
    target.write_text(code, encoding="utf-8")
    (name,) = re.findall(r'register\("([^"]+)"', code)  # the policy's or the scenario's name
    (commands,) = blocks(text, "bash")
    lines = shell_lines(commands)
    assert lines
    for i, line in enumerate(lines):
        assert line.startswith(".venv/bin/python "), line
        done = run(line, repo)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        if i == 0:
            assert name in done.stdout  # the new policy's row, or the new scenario's settings
        assert "Traceback" not in done.stdout + done.stderr
