#pragma once
/// The oneDNN cpu backend (kernels/cpu). Only compiled with PET_WITH_DNNL.
#include "pet/backend/backend.hpp"

namespace pet::backend {
std::unique_ptr<Backend> make_cpu_backend();
}
