#!/usr/bin/env bash
# Installs pet from the build tree into a scratch prefix, builds the out-of-tree rule example
# (examples/out_of_tree_rule) against it with find_package(pet), runs it, and checks with
# `pet verify` that the mutant it writes computes what the original computes.
# usage: example_test.sh BUILD_DIR SOURCE_DIR PET
set -euo pipefail
build=$1 src=$2 pet=$3
prefix=$build/_example_install
out=$build/_example_build
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src/examples/out_of_tree_rule" -B "$out" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > /dev/null
cmake --build "$out" -j2 > /dev/null
"$out/split_filters_demo" "$out" | tee "$out/log.txt"
grep -q "conv-split-filters: equivalent" "$out/log.txt"
"$pet" info "$out/mutant.onnx" | grep -q "Concat"
"$pet" verify "$out/original.onnx" "$out/mutant.onnx" | tee -a "$out/log.txt" | grep -q "equivalent"
echo "example: built against the installed pet, its rule ran and its mutant is equivalent"
