// ff-collective entry point: launcher, comparison or a single rank, chosen by the options.
#include <cstdio>

#include "tests/collective/abort_context.h"
#include "tests/collective/local_launcher.h"
#include "tests/collective/options.h"
#include "tests/collective/rank_runner.h"

int main(int argc, char** argv) {
  using namespace ff::collective;
  Options o = ParseOptions(argc, argv);
  try {
    if (o.launch_local) return o.bench_compare ? BenchCompare(o) : LaunchLocal(o, o.backend, o.result_file);
    return RunRank(o);
  } catch (const DriverError& e) {
    std::fprintf(stderr, "ff-collective: %s\n", e.what());
    return kExitError;
  }
}
