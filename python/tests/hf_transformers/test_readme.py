"""The README's transformers snippet, run as written (by tests/package/test_readme.py's runner) in this suite's
environment, the only one with transformers."""

import importlib.util
import pathlib
import re

import pytest

pytest.importorskip("transformers")

_spec = importlib.util.spec_from_file_location(
    "package_test_readme", pathlib.Path(__file__).resolve().parents[1] / "package" / "test_readme.py")
readme = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme)

INDEXES = [i for i, b in enumerate(readme.python_blocks()) if re.search(r"^import .*\btransformers\b", b, re.M)]


def test_the_readme_has_a_transformers_snippet():
    assert INDEXES


@pytest.mark.parametrize("index", INDEXES)
def test_transformers_snippet_runs_as_written(index):
    readme.test_snippet_runs_as_written(index)
