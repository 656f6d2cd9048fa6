#pragma once
/// Random small programs over pet's whole op set, for differential testing of the backends
/// (tests/difftest/difftest.cpp). The generator leans towards what backends fuse: chains
/// after convs and matmuls (activations, scalings, residual adds, biases, batch norms), zero
/// pads before convs and pools, the GELU and decomposed LayerNorm patterns PyTorch exports,
/// intermediates read twice or listed as outputs, and views of tensors that stay alive.
///
/// A program is a pure function of (seed, options): the same seed gives the same graph.
#include <cstdint>
#include <string>

#include "pet/ir/graph.hpp"

namespace pet::difftest {

struct GenOptions {
  int min_ops = 2, max_ops = 14;   ///< graph nodes (patterns count each node)
  int64_t max_elements = 12000;    ///< no tensor larger than this
};

/// The program for one seed. Never throws (a step that does not type-check is retried
/// with other choices).
Graph random_program(uint64_t seed, const GenOptions& opt = {});

/// The seed of program `index` of a run started with `run_seed`.
uint64_t program_seed(uint64_t run_seed, uint64_t index);

}  // namespace pet::difftest
