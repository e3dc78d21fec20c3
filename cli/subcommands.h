// The `flexiforce` program's subcommands; each lives with its component and is listed here once.
#pragma once

namespace ff::cli {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

}  // namespace ff::cli
