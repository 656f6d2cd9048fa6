#pragma once
/// The cuda backend (kernels/cuda): cuDNN, cuBLAS and pet's CUDA kernels. Only compiled with
/// PET_WITH_CUDA; without a CUDA device it refuses with Unsupported ("no CUDA device ...").
#include "pet/backend/backend.hpp"

namespace pet::backend {
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opt);
}
