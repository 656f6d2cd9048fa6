// The cpu backend's version (algorithm_cache.hpp).
#include "algorithm_cache.hpp"

#include <dnnl.hpp>

#include "pet/core/error.hpp"

namespace pet::backend::cpu_detail {

std::string cpu_backend_version() {
  const dnnl_version_t* v = dnnl_version();
  return cat("onednn", v->major, ".", v->minor, ".", v->patch, "+pet11");
}

}  // namespace pet::backend::cpu_detail
