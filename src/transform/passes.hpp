#pragma once
// The built-in passes (private to src/transform; the API is include/pet/transform/pass.hpp).
#include <functional>
#include <memory>
#include <vector>

#include "pet/transform/pass.hpp"
#include "pet/transform/patterns.hpp"

namespace pet::transform::detail {

/// Factories of every built-in pass, in catalogue order.
const std::vector<std::function<std::unique_ptr<Pass>()>>& builtin_passes();


}  // namespace pet::transform::detail
