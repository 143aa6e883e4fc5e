"""The README's "Add a policy" and "Add a scenario" sections run as written: in a copy of the
repository, each section's Python file is saved where its first line says, and each of its
commands runs there (``.venv/bin/python`` being this interpreter) and exits 0."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("Add a policy", "Add a scenario")


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's tracked files, as they are in the working tree, in a fresh folder."""
    copy = tmp_path_factory.mktemp("repo")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    return copy


@pytest.mark.parametrize("title", SECTIONS)
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
    lines = [ln for ln in commands.splitlines() if ln.strip()]
    assert lines
    for i, line in enumerate(lines):
        argv = shlex.split(line, comments=True)
        assert argv[0] == ".venv/bin/python", line
        done = subprocess.run([sys.executable, *argv[1:]], cwd=repo, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        if i == 0:
            assert name in done.stdout  # the new policy's row, or the new scenario's settings
        assert "Traceback" not in done.stdout + done.stderr
