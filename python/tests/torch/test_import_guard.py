"""Importing hymoe.torch where hymoe._torch_core was not built (pip's isolated build, no PyTorch headers) is
silent and takes the numpy-based path; a _torch_core that is there but does not load warns (issue 25)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
import hymoe  # noqa: E402


def _import_with_extension_dir(ext_dir):
    env = dict(os.environ, HYMOE_EXTENSION_DIR=str(ext_dir), PYTHONPATH=str(Path(hymoe.__file__).parents[1]))
    code = "import warnings; warnings.simplefilter('always'); import hymoe.torch as t; print('FAST', t.FAST_FORWARD)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def _core_file():
    if any(Path(hymoe.__file__).parent.glob("_torch_core*")):
        pytest.skip("a _torch_core lies in the package itself (an installed hymoe): no folder leaves it out")
    found = [p.resolve() for d in hymoe.__path__ for p in Path(d).glob("_core*.so")]
    if not found:
        pytest.skip("no built hymoe._core beside the package")
    return found[0]


def test_import_without_torch_core_is_silent(tmp_path):
    core = _core_file()
    (tmp_path / core.name).symlink_to(core)
    r = _import_with_extension_dir(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "FAST False" in r.stdout and "_torch_core" not in r.stderr, r.stderr


def test_import_with_a_broken_torch_core_warns(tmp_path):
    core = _core_file()
    (tmp_path / core.name).symlink_to(core)
    (tmp_path / core.name.replace("_core", "_torch_core", 1)).write_bytes(b"not an ELF file")
    r = _import_with_extension_dir(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "FAST False" in r.stdout and "hymoe._torch_core does not load" in r.stderr, r.stderr


def test_a_torch_core_built_against_another_torch_is_not_loaded(tmp_path):
    """The build's stamp names another PyTorch: a warning naming both versions, and the module is never loaded
    (a file that would crash the import shows it was not even opened)."""
    core = _core_file()
    (tmp_path / core.name).symlink_to(core)
    (tmp_path / core.name.replace("_core", "_torch_core", 1)).write_bytes(b"not an ELF file")
    (tmp_path / "_torch_core_build.py").write_text('TORCH_VERSION = "0.0.1-other"\n')
    r = _import_with_extension_dir(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "FAST False" in r.stdout, r.stdout
    assert "was built against torch 0.0.1-other, not this" in r.stderr and "does not load" not in r.stderr, r.stderr


def test_the_build_stamps_the_torch_it_was_built_against():
    import torch

    import hymoe.torch as t

    if not t.FAST_FORWARD:
        pytest.skip("hymoe._torch_core is not built here")
    from hymoe._torch_core_build import TORCH_VERSION

    assert TORCH_VERSION == torch.__version__
