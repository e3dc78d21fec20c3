// One rank's whole run: rendezvous, transport setup, the size sweep with checks, the report, teardown.
#pragma once

#include "tests/collective/options.h"

namespace ff::collective {

// Exit codes of a rank (and of the launcher, which passes the worst one on).
enum ExitCode : int { kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitWrongResult = 3, kExitWatchdog = 124 };

int RunRank(const Options& options);

}  // namespace ff::collective
