#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Safe to run twice.
set -euo pipefail
pkgs=(cmake g++ make pkg-config ccache libeigen3-dev libboost-graph-dev doctest-dev
      libonnx-dev libprotobuf-dev protobuf-compiler libdnnl-dev ocl-icd-opencl-dev
      libz3-dev libbenchmark-dev libonnx-testdata
      nlohmann-json3-dev python3-numpy python3-matplotlib python3-onnx)
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
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
