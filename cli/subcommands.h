// The `flexiforce` program's subcommands; each lives with its component and is listed here once.
#pragma once

#include <cstddef>

namespace ff::cli {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

// The program's table, published by main() before it dispatches, so `flexiforce config --markdown`
// can list every command in docs/REFERENCE.md. Empty in programs that never publish one.
struct SubcommandTable {
  const Subcommand* entries = nullptr;
  size_t count = 0;
};
inline SubcommandTable g_subcommand_table;

}  // namespace ff::cli
