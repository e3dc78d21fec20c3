// Table and JSON rendering of per-size results.
#include "tests/collective/report.h"

#include "tests/collective/options.h"

namespace ff::collective {

double BusBandwidthFactor(NcclFunc coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case NcclFunc::kAllReduce: return 2.0 * (n - 1) / n;
    case NcclFunc::kAllGather: return (n - 1) / n;
    default: return 1.0;
  }
}

double AlgBandwidth(size_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e-6) / 1e9 : 0.0;
}

void PrintTableHeader(std::FILE* out, const RunInfo& i) {
  std::fprintf(out, "# ff-collective: %d ranks, %s\n", i.nranks, i.transport.c_str());
  std::fprintf(out, "# dtype %s, step %zu B, %d steps in flight, %d warmup + %d timed iterations per size\n",
               i.dtype.c_str(), i.step_bytes, i.window, i.warmup, i.iters);
  std::fprintf(out, "# %10s %13s %12s %12s %11s %11s %6s\n", "coll", "size(B)", "count", "time(us)", "algbw(GB/s)",
               "busbw(GB/s)", "check");
  std::fflush(out);
}

void PrintTableRow(std::FILE* out, const SizeResult& r, int nranks) {
  const double alg = AlgBandwidth(r.bytes, r.time_us);
  std::fprintf(out, "  %10s %13zu %12zu %12.1f %11.3f %11.3f %6s\n", CollName(r.coll).c_str(), r.bytes, r.count,
               r.time_us, alg, alg * BusBandwidthFactor(r.coll, nranks), r.ok ? "ok" : "FAIL");
  std::fflush(out);
}

nlohmann::json ReportJson(const RunInfo& i, const std::vector<SizeResult>& results) {
  nlohmann::json j;
  j["tool"] = "ff-collective";
  j["ranks"] = i.nranks;
  j["backend"] = i.backend;
  j["transport"] = i.transport;
  j["dtype"] = i.dtype;
  j["step_bytes"] = i.step_bytes;
  j["steps_in_flight"] = i.window;
  j["iters"] = i.iters;
  j["warmup"] = i.warmup;
  j["rank_pids"] = i.pids;
  bool all_ok = true;
  j["results"] = nlohmann::json::array();
  for (const auto& r : results) {
    const double alg = AlgBandwidth(r.bytes, r.time_us);
    j["results"].push_back({{"coll", CollName(r.coll)},
                            {"bytes", r.bytes},
                            {"count", r.count},
                            {"time_us", r.time_us},
                            {"algbw_gbps", alg},
                            {"busbw_gbps", alg * BusBandwidthFactor(r.coll, i.nranks)},
                            {"ok", r.ok},
                            {"messages", {{"sends", r.sends},
                                          {"send_bytes", r.send_bytes},
                                          {"recvs", r.recvs},
                                          {"recv_bytes", r.recv_bytes}}}});
    all_ok = all_ok && r.ok;
  }
  j["ok"] = all_ok;
  return j;
}

}  // namespace ff::collective
