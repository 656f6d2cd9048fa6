#pragma once
/// PET_HD marks functions that CUDA device code calls too (an op's element formula, the
/// index arithmetic of pet's CUDA kernels): `__host__ __device__` under nvcc, nothing in
/// host-only builds. One formula, compiled for both, tested on the host.
#if defined(__CUDACC__)
#define PET_HD __host__ __device__
#else
#define PET_HD
#endif

/// `throw` in a PET_HD function, on paths device code never takes (the finite-field and
/// integer branches of element formulas): the device pass of nvcc has no exceptions, so there
/// it becomes a trap.
#if defined(__CUDA_ARCH__)
#define PET_HD_THROW(...) __trap()
#else
#define PET_HD_THROW(...) throw __VA_ARGS__
#endif
