#!/usr/bin/env bash
# Installs every build and test dependency: Debian 12 packages (needs root or sudo), and a
# project virtual environment (.venv) with ONNX Runtime and OpenVINO, which the interop tests
# run pet's ONNX files in. Safe to run twice.
#   --peers      accepted for older scripts: OpenVINO is in .venv anyway
#   PET_SETUP_MINIMAL=1   no torch (real-model tests then skip)
#   PET_SETUP_NO_VENV=1   no .venv (interop tests then skip)
set -euo pipefail
cd "$(dirname "$0")/.."
for a in "$@"; do
  case "$a" in
    --peers) ;;
    *) echo "setup: unknown option $a (use --peers)" >&2; exit 2 ;;
  esac
done
pkgs=(cmake g++ make pkg-config ccache libeigen3-dev libboost-graph-dev doctest-dev
      libonnx-dev libprotobuf-dev protobuf-compiler libdnnl-dev ocl-icd-opencl-dev
      libz3-dev libbenchmark-dev libonnx-testdata
      nlohmann-json3-dev libsqlite3-dev python3-numpy python3-matplotlib python3-onnx python3-venv)
# Peers and real-model export (tests that need them skip cleanly without them).
if [ "${PET_SETUP_MINIMAL:-0}" != 1 ]; then
  pkgs+=(python3-torch python3-torchvision libopenblas0)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages already installed"
else
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime and OpenVINO from PyPI, in .venv: Debian's interpreter, PyPI's onnx and numpy
# beside them (Debian's python3-onnx is 1.12 and stays for the system python). Both are the
# runtimes pet's ONNX files must run in (the interop tests) and the peers of the experiments.
[ "${PET_SETUP_NO_VENV:-0}" = 1 ] && exit 0
have() { [ -x .venv/bin/python ] && .venv/bin/python -c "$1" 2>/dev/null; }
install() {  # what: the tests that skip without it
  local what=$1; shift
  if have "$check"; then
    echo "setup: .venv has $*"
  elif .venv/bin/python -m pip install -q --disable-pip-version-check "$@"; then
    echo "setup: .venv: installed $*"
  else
    echo "setup: warning: could not install $* from PyPI; $what will skip" >&2
  fi
}
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv .venv
check="import onnxruntime, onnx, numpy" install "the ONNX Runtime interop tests" onnxruntime==1.20.1 onnx==1.17.0 "numpy<2.2"
check="import openvino" install "the OpenVINO interop tests" openvino==2024.6.0 "numpy<2.2"
