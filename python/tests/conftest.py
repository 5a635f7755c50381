"""Shared by the Python suites: where the repository's test data is."""

import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_DATA = REPO_ROOT / "tests" / "data"
