// The main of every doctest binary. ctest runs each test case alone, by name
// (doctest_discover_tests: --test-case=NAME), and doctest passes a run whose filter matches
// no test case: a test that cannot fail. It happened: names with a ';' were split in two by
// CMake's list syntax, and those test cases never ran under ctest. Here a run with a
// --test-case filter that selects nothing fails, naming the filter.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

namespace {
int g_selected = -1;  ///< test cases that passed the filters (-1: no run ended)

struct SelectedCount : doctest::IReporter {
  explicit SelectedCount(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override { g_selected = int(s.numTestCasesPassingFilters); }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("selected-count", 1, SelectedCount);
}  // namespace

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit()) return rc;  // --help, --list-test-cases, ...
  const char* filter = nullptr;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--test-case=", 12) == 0 || std::strncmp(argv[i], "-tc=", 4) == 0) filter = argv[i];
  if (rc == 0 && filter && g_selected == 0) {
    std::fprintf(stderr, "no test case matches %s (a ';' in a test case's name splits it under ctest)\n", filter);
    return 1;
  }
  return rc;
}
