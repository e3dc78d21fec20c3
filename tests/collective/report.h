// Bandwidth arithmetic (nccl-tests definitions) and the driver's table and JSON output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nccl/net_abi.h"

namespace ff::collective {

struct SizeResult {
  NcclFunc coll;
  size_t bytes = 0;  // nccl-tests "size": AllGather counts the whole gathered output
  size_t count = 0;  // elements per rank
  double time_us = 0;  // slowest rank's mean time per iteration
  bool ok = true;
  // Summed over every rank, warmup and timed iterations: completed isend/irecv steps and their bytes.
  uint64_t sends = 0;
  uint64_t send_bytes = 0;
  uint64_t recvs = 0;
  uint64_t recv_bytes = 0;
};

// busbw / algbw: AllReduce 2(n-1)/n, AllGather (n-1)/n, Broadcast 1.
double BusBandwidthFactor(NcclFunc coll, int nranks);
// GB/s (1e9 bytes per second), as nccl-tests prints.
double AlgBandwidth(size_t bytes, double time_us);

struct RunInfo {
  int nranks = 0;
  std::string backend;
  std::string transport;
  std::string dtype;
  size_t step_bytes = 0;
  int window = 0;
  int iters = 0;
  int warmup = 0;
  std::vector<int> pids;  // pid of each rank's process, by rank (to find a rank's statistics file)
};

void PrintTableHeader(std::FILE* out, const RunInfo& info);
void PrintTableRow(std::FILE* out, const SizeResult& r, int nranks);
nlohmann::json ReportJson(const RunInfo& info, const std::vector<SizeResult>& results);

}  // namespace ff::collective
