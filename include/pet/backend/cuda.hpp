#pragma once
/// The cuda backend (kernels/cuda): cuDNN, cuBLAS and pet's CUDA kernels. Built with
/// PET_WITH_CUDA as a module, libpet_cuda.so, that make_backend("cuda") loads on first use
/// (pet itself never links the CUDA libraries); without a CUDA device it refuses with
/// Unsupported ("no CUDA device ...").
#include "pet/backend/backend.hpp"

namespace pet::backend {
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opt);

/// What pet and its cuda module must agree on to call each other: the layouts of what
/// crosses between them. A module built from another version is refused, not called.
inline long cuda_module_abi() {
  constexpr long interface_version = 1;  // one more whenever Backend, Executable or their options change
  return interface_version * 1000000 + 10000 * long(sizeof(Graph) % 100) + 100 * long(sizeof(CompileOptions) % 100) +
         long(sizeof(BackendOptions) % 100);
}
}  // namespace pet::backend

extern "C" {
/// The module's entry points (kernels/cuda/module.cpp).
__attribute__((visibility("default"))) long pet_cuda_module_abi();
__attribute__((visibility("default"))) pet::backend::Backend* pet_make_cuda_backend(const pet::backend::BackendOptions* opt);
}
