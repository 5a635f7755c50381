#!/usr/bin/env bash
# Installs the Debian packages hymoe builds against, plus any named as arguments (the AVX-512 emulation script
# passes its own). The Python extension and its tests use Debian's python3 with its numpy, pytest, pybind11 and
# PyTorch (CPU) packages, and PyTorch's C++ headers (libtorch-dev) for hymoe._torch_core (docs/python.md gives the
# cost of each choice). Idempotent: packages already present are
# skipped, so a machine that has everything runs no apt-get at all. Nothing is downloaded at build time; this is the
# only step that installs from a package registry.
set -euo pipefail
packages=(cmake ninja-build g++ clang libclang-rt-dev libomp-dev
          nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
          libopenmpi-dev openmpi-bin
          python3-dev pybind11-dev python3-numpy python3-pytest python3-torch libtorch-dev "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
