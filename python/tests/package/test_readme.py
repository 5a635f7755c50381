"""The README's Python section runs as written: every ```python block in it is run from the repository root (where
its file paths point) in a fresh interpreter, and what it prints after `#` comments on print lines is checked."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import hymoe

from conftest import REPO_ROOT


def python_blocks():
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index("\n## Python\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


def test_the_section_has_its_snippets():
    blocks = python_blocks()
    assert len(blocks) >= 2
    assert any("import hymoe.placement as kt" in b for b in blocks)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_snippet_runs_as_written(index):
    block = python_blocks()[index]
    if re.search(r"^import .*\btransformers\b|^from transformers", block, flags=re.M):
        pytest.importorskip("transformers", reason="the transformers snippet runs in tests/hf_transformers/test_readme.py, "
                            "in the venv of scripts/setup_pypi.sh")
    if re.search(r"^import torch|^from torch", block, flags=re.M):
        pytest.importorskip("torch")
    # The snippet imports the same hymoe as this test, whatever the working folder.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(pathlib.Path(hymoe.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    if "HYMOE_EXTENSION_DIR" in env:
        env["HYMOE_EXTENSION_DIR"] = os.path.abspath(env["HYMOE_EXTENSION_DIR"])
    result = subprocess.run([sys.executable, "-c", block], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    # Each print prints one line; a trailing comment on it states that line (whitespace-insensitive; a note in
    # parentheses after it is prose).
    printed = result.stdout.splitlines()
    prints = [line for line in block.splitlines() if line.lstrip().startswith("print(")]
    assert len(printed) == len(prints), result.stdout
    for code, line in zip(prints, printed):
        if "#" in code:
            claim = code.split("#", 1)[1].split("  (", 1)[0]
            assert re.sub(r"\s+", "", line) == re.sub(r"\s+", "", claim), (line, claim)
