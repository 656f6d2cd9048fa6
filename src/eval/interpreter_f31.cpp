#include "evaluate_impl.hpp"

namespace pet {
PET_INSTANTIATE_INTERPRETER(F31)
}  // namespace pet
