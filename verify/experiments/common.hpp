#pragma once
// Shared helpers of the lab's experiment drivers: CSV output with the environment recorded,
// progress lines on stderr.
#include <sys/utsname.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

namespace pet::lab {

/// Opens a CSV file whose first lines (starting with '#') record how and where it was made.
inline std::ofstream open_csv(const std::string& path, const std::string& what, const std::string& header) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  utsname u{};
  uname(&u);
  std::time_t t = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  f << "# " << what << "\n# host " << u.nodename << " " << u.sysname << " " << u.release << " " << u.machine << ", " << when << "\n"
    << header << "\n";
  return f;
}

/// A progress line on stderr, at most a few times per second.
class Progress {
 public:
  Progress(std::string what, int64_t total) : what_(std::move(what)), total_(total) {}
  void tick(int64_t done) {
    auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(250)) return;
    last_ = now;
    std::fprintf(stderr, "\r%s: %lld/%lld", what_.c_str(), (long long)done, (long long)total_);
    if (done >= total_) std::fprintf(stderr, "\n");
  }

 private:
  std::string what_;
  int64_t total_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace pet::lab
