// Command-line options of ff-collective, their parsing and their re-serialisation for launched ranks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nccl/net_abi.h"
#include "tests/collective/collective_data.h"

namespace ff::collective {

enum class Backend { kPlugin, kRaw };

struct Options {
  // Launch
  bool launch_local = false;
  int launch_ranks = 0;  // --ranks, with --launch-local
  int rank = -1;
  int nranks = 0;
  std::string rendezvous;  // HOST:PORT
  std::string bind_ip;
  int rendezvous_fd = -1;  // hidden: listening socket inherited from --launch-local

  // Work
  std::vector<NcclFunc> colls;
  DataType dtype = DataType::kInt32;
  size_t min_bytes = 1u << 20;
  size_t max_bytes = 16u << 20;
  size_t step_bytes = 512u << 10;
  int window = 8;
  // Each pass tests only the oldest outstanding send and receive, as NCCL's proxy does (it tests the
  // request of the next step to complete, then moves on); --test-all tests every outstanding one.
  bool test_all = false;
  int iters = 10;
  int warmup = 2;
  int root = 0;

  // Transport
  Backend backend = Backend::kPlugin;
  int raw_streams = 1;
  std::string plugin_path;
  int dev = 0;
  int dev_cycle = 0;  // --dev-cycle N (with --launch-local): rank r uses device (dev + r * dev_step) % N; 0: all use dev
  int dev_step = 1;
  // Drive the plugin's ncclProfiler_v5 table as NCCL 2.28 does: -1 auto (when exported), 1 on, 0 off.
  int profiler = -1;
  bool net_attr = true;  // hidden --no-net-attr: skip setNetAttr (tests attribution by the profiler alone)

  // Output and control
  bool json = false;
  bool bench_compare = false;
  std::string result_file;  // hidden: rank 0 writes its JSON report here too
  double timeout_s = 120;
  bool inject_corruption = false;  // hidden: a rank flips one received bit
  int inject_exit_rank = -1;       // hidden: this rank exits mid-collective
};

// Parses argv; prints help and exits 0 on --help, prints the error and exits 2 on bad input.
Options ParseOptions(int argc, char** argv);

// Arguments for one launched rank (everything but the launch and comparison options).
std::vector<std::string> RankArguments(const Options& o, int rank, int nranks, const std::string& rendezvous,
                                       int rendezvous_fd, Backend backend, const std::string& result_file);

std::string CollName(NcclFunc f);
std::string BackendName(Backend b);

}  // namespace ff::collective
