// `flexiforce path bench`: our k-shortest search and ranking against networkx on the same
// generated fabrics and queries, in one run.
#pragma once

#include <cstddef>
#include <string>

namespace ff::pathctl {

struct BenchOptions {
  size_t k = 5;
  size_t queries = 20;           // per topology, for our side
  size_t networkx_queries = 5;   // per topology (networkx is slow on the fat tree)
  int fat_tree_k = 32;           // 32 -> 8192 hosts
  bool networkx = true;
  std::string python = "/usr/bin/python3";
  std::string networkx_script;   // empty: the script next to the sources
  bool json = false;
};

// Prints the table (or JSON) to stdout; returns 0, or 1 when path sets disagree.
int RunPathBench(const BenchOptions& options);

}  // namespace ff::pathctl
