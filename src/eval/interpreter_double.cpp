#include "evaluate_impl.hpp"

namespace pet {
PET_INSTANTIATE_INTERPRETER(double)
}  // namespace pet
