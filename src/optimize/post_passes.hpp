#pragma once
// The optimizer's own passes (they need the verifier, so they live above pet_transform).
#include <memory>

#include "pet/transform/pass.hpp"

namespace pet::optimize {

std::unique_ptr<transform::Pass> make_rt_through_activation();
std::unique_ptr<transform::Pass> make_inverse_rt_elimination();

}  // namespace pet::optimize
