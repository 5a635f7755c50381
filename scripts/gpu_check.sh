#!/usr/bin/env bash
# The checks that need a GPU (docs/runtime.md, "What needs a GPU"), for a machine with an NVIDIA GPU, the CUDA
# toolkit, a C++ compiler, CMake, Ninja and a python3 with PyTorch (CUDA), pytest and pybind11: builds hymoe._core
# with that toolkit, runs hymoe.kt's CUDA-tensor tests and the wrapper's CPU suite beside them, and, where given,
# the C++ engine tests of a test binary built elsewhere (HYMOE_GPU_TESTS). Build dependencies such a machine may
# lack (nlohmann-json, CLI11, fmt: Debian packages on ours) are taken from HYMOE_GPU_PREFIX, a folder laid out as
# / (usr/include, usr/share/cmake, ...), when set. Prints one line per step; exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(command -v python3)
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $("$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)')"
prefix_path="$("$py" -c 'import pybind11; print(pybind11.get_cmake_dir())')"
[ -n "${HYMOE_GPU_PREFIX:-}" ] && prefix_path="$(realpath "$HYMOE_GPU_PREFIX")/usr;$prefix_path"
mkdir -p build
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHYMOE_BUILD_TESTS=OFF -DHYMOE_BUILD_BENCH=OFF \
  -DPython_EXECUTABLE="$py" -DCMAKE_PREFIX_PATH="$prefix_path" >build/gpu-configure.log 2>&1 \
  || { tail -30 build/gpu-configure.log; exit 1; }
grep -E "hymoe runtime|hymoe python" build/gpu-configure.log
cmake --build build/gpu --target _core >build/gpu-build.log 2>&1 || { tail -40 build/gpu-build.log; exit 1; }
echo "== hymoe._core built"
if [ -n "${HYMOE_GPU_TESTS:-}" ]; then
  echo "== C++ engine tests on the GPU's driver"
  "$HYMOE_GPU_TESTS" --gtest_filter='ExpertEngine*' --gtest_brief=1
fi
echo "== hymoe.kt on CUDA tensors"
HYMOE_EXTENSION_DIR="$PWD/build/gpu/python" PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -q -rs -p no:cacheprovider --timeout 120 python/tests/kt/test_kt_cuda.py python/tests/kt/test_kt_wrapper.py
