"""hymoe from Python: GPU-expert placement (hymoe.placement, a drop-in for kt-kernel's) and the MoE layer
(hymoe.torch, a drop-in for KempnerForge's). The C++ core is the extension module hymoe._core; docs/python.md
describes the API, the array rules and the threading."""

import os as _os

# Tests and development against a CMake build tree: the source package plus the extension built there
# (ctest sets this to the folder holding _core; an installed package never needs it).
_extension_dir = _os.environ.get("HYMOE_EXTENSION_DIR")
if _extension_dir:
    __path__.append(_extension_dir)

__version__ = "0.1.0"
