// The cpu backend: compiles a graph into a CpuExecutable (see executable.hpp).
#include "algorithm_cache.hpp"
#include "executable.hpp"
#include "pet/backend/cpu.hpp"

namespace pet::backend {

namespace {
class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string version() const override { return cpu_detail::cpu_backend_version(); }
  std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opt) override {
    return std::make_unique<cpu_detail::CpuExecutable>(g, opt);
  }
};
}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

bool cpu_int8_available() { return cpu_detail::CpuExecutable::int8_isa(); }

}  // namespace pet::backend
