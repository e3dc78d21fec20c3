// --launch-local: starts every rank as a child process on this host and supervises them; also the plugin-vs-raw comparison.
#pragma once

#include "tests/collective/options.h"

namespace ff::collective {

// Runs o.nranks ranks with the given backend; returns 0 when all exit 0, else the first
// failing rank's exit code. A rank left running after another failed is killed after a grace period.
int LaunchLocal(const Options& o, Backend backend, const std::string& result_file);

// Runs every sweep point through the plugin and then raw sockets (alternating) and prints busbw and the ratio.
int BenchCompare(const Options& o);

}  // namespace ff::collective
