#include "evaluate_impl.hpp"

namespace pet {
PET_INSTANTIATE_INTERPRETER(float)
}  // namespace pet
