#pragma once
/// The oneDNN cpu backend (kernels/cpu). Only compiled with PET_WITH_DNNL.
#include "pet/backend/backend.hpp"

namespace pet::backend {
std::unique_ptr<Backend> make_cpu_backend();
/// Whether this CPU runs oneDNN's int8 kernels exactly (VNNI: AVX-512 VNNI, AVX-VNNI or AMX;
/// ONEDNN_MAX_CPU_ISA may hide it), so that quantized convs use them (CompileOptions::int8).
bool cpu_int8_available();
}
