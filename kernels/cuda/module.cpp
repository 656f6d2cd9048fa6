// The cuda backend as a module (libpet_cuda.so) that pet loads on first use of
// make_backend("cuda") (src/backend/backend.cpp): pet itself never links the CUDA libraries.
// The module carries its own copy of the pet code the backend uses, its symbols hidden.
#include "pet/backend/cuda.hpp"

extern "C" long pet_cuda_module_abi() { return pet::backend::cuda_module_abi(); }

extern "C" pet::backend::Backend* pet_make_cuda_backend(const pet::backend::BackendOptions* opt) {
  return pet::backend::make_cuda_backend(*opt).release();
}
