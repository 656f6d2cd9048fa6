#pragma once
/// Errors: every failure pet reports is one of three exception types with a full sentence.
///  - InvalidInput: the caller's fault (bad model, wrong shapes, bad flag).
///  - Unsupported: valid input that pet does not implement (names the op / opset / feature).
///  - InternalError: pet's own bug, raised by an always-on PET_CHECK.
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pet {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct InvalidInput : Error {
  using Error::Error;
};
struct Unsupported : Error {
  using Error::Error;
};
struct InternalError : Error {
  using Error::Error;
};

namespace detail {
template <class T>
void put(std::ostream& os, const T& v) {
  if constexpr (requires { v.begin(); v.end(); } && !std::is_convertible_v<T, std::string_view>) {
    os << '[';
    bool first = true;
    for (const auto& x : v) {
      if (!first) os << ',';
      first = false;
      put(os, x);
    }
    os << ']';
  } else {
    os << v;
  }
}
}  // namespace detail

/// Concatenates its arguments into a string; ranges print as [a,b,c].
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (detail::put(os, a), ...);
  return os.str();
}

namespace detail {
[[noreturn]] inline void internal_error(const char* file, int line, const char* cond,
                                        const std::string& msg) {
  throw InternalError(cat("internal error at ", file, ":", line, ": check '", cond, "' failed",
                          msg.empty() ? "" : ": ", msg));
}
}  // namespace detail

}  // namespace pet

/// Always-on invariant check (pet's own bugs). Never put side effects in `cond`.
#define PET_CHECK(cond, ...)                                                            \
  do {                                                                                  \
    if (!(cond)) ::pet::detail::internal_error(__FILE__, __LINE__, #cond, ::pet::cat(__VA_ARGS__)); \
  } while (0)
