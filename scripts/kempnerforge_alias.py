"""A pytest plugin (loaded with ``-p kempnerforge_alias``, by scripts/run_kempnerforge_tests.sh) that makes
``kempnerforge.model.moe`` resolve to ``hymoe.torch`` while the rest of KempnerForge stays its own code.

It installs an import finder before any test module or conftest imports KempnerForge: the import of that one
module name returns hymoe.torch (and sets it as the ``moe`` attribute of ``kempnerforge.model``, as a real import
would). Nothing is fetched, copied or patched in the KempnerForge checkout."""

import importlib.abc
import importlib.machinery
import sys

ALIASED = "kempnerforge.model.moe"


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec):
        import hymoe.torch

        return hymoe.torch

    def exec_module(self, module):  # hymoe.torch is already executed
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != ALIASED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader())


sys.meta_path.insert(0, _AliasFinder())


_built = {"native": 0, "torch": 0}


def pytest_configure(config):
    """Counts the MoE layers the tests build and how many run on hymoe's C++ layer, for the summary."""
    import hymoe.torch

    init = hymoe.torch.MoEMLP.__init__

    def counting_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _built["native" if self.native else "torch"] += 1

    hymoe.torch.MoEMLP.__init__ = counting_init


def pytest_terminal_summary(terminalreporter):
    import hymoe.torch
    import torch

    moe = sys.modules.get(ALIASED)
    if moe is not None and moe is not hymoe.torch:
        raise RuntimeError(f"{ALIASED} resolved to {moe!r}, not hymoe.torch")
    terminalreporter.write_line(
        f"{ALIASED} -> hymoe.torch ({hymoe.torch.__file__}), torch {torch.__version__}, fast forward "
        f"{hymoe.torch.FAST_FORWARD}: {_built['native']} MoE layers built on hymoe's C++ layer, "
        f"{_built['torch']} run in torch (modules hymoe does not compute)")
