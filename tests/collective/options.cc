// ff-collective's options (CLI11): validation with the accepted form in every error.
#include "tests/collective/options.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "cli/plugin_loader.h"

namespace ff::collective {
namespace {

// "4096", "512K", "1M", "2G" (binary multiples); throws with the accepted form.
size_t ParseSize(const std::string& text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || text[0] == '-') {
    throw CLI::ValidationError(what, "'" + text + "' is not a size; use bytes or a K/M/G suffix, e.g. 512K, 1M");
  }
  std::string suffix(end);
  unsigned long long mul = 1;
  if (suffix == "" || suffix == "B") mul = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mul = 1ull << 30;
  else throw CLI::ValidationError(what, "unknown suffix '" + suffix + "' in '" + text + "'; use K, M or G");
  return static_cast<size_t>(v * mul);
}

std::string SizeArg(size_t v) { return std::to_string(v); }

}  // namespace

std::string CollName(NcclFunc f) {
  switch (f) {
    case NcclFunc::kAllReduce: return "allreduce";
    case NcclFunc::kAllGather: return "allgather";
    case NcclFunc::kBroadcast: return "broadcast";
    default: return "unsupported";
  }
}

std::string BackendName(Backend b) { return b == Backend::kPlugin ? "plugin" : "raw"; }

Options ParseOptions(int argc, char** argv) {
  Options o;
  CLI::App app{
      "ff-collective: CPU stand-in for NCCL. Runs ring AllReduce (sum), AllGather and Broadcast on host\n"
      "buffers across one process per rank, through the FlexiForce plugin's ncclNet v11 C ABI or raw TCP\n"
      "sockets, checks every element exactly and reports algbw/busbw (nccl-tests definitions).\n\n"
      "  all ranks on this host:  ff-collective --ranks 4 --launch-local --coll all\n"
      "  one rank per host:       ff-collective --rank R --nranks N --rendezvous HOST:PORT [--bind-ip IP]\n"
      "                           (rank 0 listens on HOST:PORT, the others connect and retry until it is up)\n"
      "  plugin vs raw benchmark: ff-collective --ranks 4 --launch-local --bench-compare --min-bytes 1M --max-bytes 256M\n\n"
      "The plugin chooses its own interface (NCCL_SOCKET_IFNAME etc. are read by the plugin, not by the\n"
      "driver); --bind-ip only places the rendezvous and raw-backend sockets.\n"
      "Exit status: 0 every check passed; 1 error (plugin, network, timeout, peer died); 2 bad usage;\n"
      "3 a result was wrong (first bad element printed); 124 watchdog killed a hung rank.",
      "ff-collective"};
  app.set_help_flag("-h,--help", "Print this help and exit");

  std::string colls = "allreduce", dtype = "int32", backend = "plugin";
  std::string min_bytes, max_bytes, step_bytes;
  app.add_flag("--launch-local", o.launch_local, "Fork and exec all ranks on this host over loopback");
  app.add_option("--ranks", o.launch_ranks, "Number of ranks to launch with --launch-local")->check(CLI::Range(2, 64));
  app.add_option("--rank", o.rank, "This process's rank (0..nranks-1), without --launch-local");
  app.add_option("--nranks", o.nranks, "Number of ranks, without --launch-local")->check(CLI::Range(2, 1024));
  app.add_option("--rendezvous", o.rendezvous, "HOST:PORT of rank 0's rendezvous, without --launch-local");
  app.add_option("--bind-ip", o.bind_ip, "Local IPv4 address for the rendezvous and raw sockets (default: the route's)");
  app.add_option("--rendezvous-fd", o.rendezvous_fd, "internal: inherited listening socket")->group("");
  app.add_option("--coll", colls, "allreduce|allgather|broadcast|all, or a comma-separated list")
      ->capture_default_str();
  app.add_option("--dtype", dtype, "int32|int64")->capture_default_str();
  app.add_option("--min-bytes", min_bytes, "Smallest size (bytes, or K/M/G suffix; default 1M)");
  app.add_option("--max-bytes", max_bytes, "Largest size; sizes double from min to max (default 16M)");
  app.add_option("--step-bytes", step_bytes, "Pipelining step: bytes per isend/irecv (default 512K)");
  app.add_option("--steps-in-flight", o.window, "Steps in flight per peer and direction (NCCL_STEPS = 8)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_flag("--test-all", o.test_all,
               "Test every outstanding send and receive on each pass (default: only the oldest of each direction, "
               "as NCCL's proxy does; the plugin then has to make all its progress in that one call)");
  app.add_option("--iters", o.iters, "Timed iterations per size")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed, individually checked iterations per size")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--root", o.root, "Broadcast root rank")->capture_default_str();
  app.add_option("--backend", backend, "plugin (FlexiForce through the ncclNet C ABI) | raw (driver's own TCP sockets)")
      ->capture_default_str();
  app.add_option("--raw-streams", o.raw_streams, "Raw backend: sockets per neighbour per direction")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--plugin", o.plugin_path, "Plugin .so (default $FF_PLUGIN_PATH, else the build tree's)");
  app.add_option("--dev", o.dev, "Plugin device index")->capture_default_str();
  app.add_option("--dev-cycle", o.dev_cycle,
                 "With --launch-local: rank r uses plugin device (--dev + r * --dev-step) % N, e.g. 2 to alternate two NICs so "
                 "every ring step crosses between them; 0: every rank uses --dev")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--dev-step", o.dev_step,
                 "With --dev-cycle: rank r uses device (--dev + r * S) % N, e.g. 2 with N = 4 to put rank 0 on devices "
                 "0/1 and rank 1 on 2/3")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  bool prof_on = false, prof_off = false, no_net_attr = false;
  auto* prof_flag = app.add_flag("--profiler", prof_on,
                                 "Drive the plugin's ncclProfiler_v5 table as NCCL 2.28 does (Coll, ProxyOp, ProxyStep "
                                 "events; isend/irecv get NCCL's phandle); default: on when the plugin exports it");
  app.add_flag("--no-profiler", prof_off, "Do not drive the profiler (isend/irecv get a NULL phandle)")
      ->excludes(prof_flag);
  app.add_flag("--no-net-attr", no_net_attr, "internal: never call setNetAttr")->group("");
  app.add_flag("--json", o.json, "Print the report as JSON (rank 0)");
  app.add_flag("--bench-compare", o.bench_compare,
               "With --launch-local: run the sweep through the plugin and then raw sockets, print busbw ratio");
  app.add_option("--result-file", o.result_file, "internal: rank 0 also writes its JSON report here")->group("");
  app.add_option("--timeout-s", o.timeout_s, "Global limit per rank; nothing waits longer")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_flag("--inject-corruption", o.inject_corruption, "internal: rank 1 flips a received bit")->group("");
  app.add_option("--inject-exit", o.inject_exit_rank, "internal: this rank exits mid-collective")->group("");

  try {
    app.parse(argc, argv);
    auto size_or = [](const std::string& s, size_t def, const std::string& what) {
      return s.empty() ? def : ParseSize(s, what);
    };
    o.min_bytes = size_or(min_bytes, o.min_bytes, "--min-bytes");
    o.max_bytes = size_or(max_bytes, o.max_bytes, "--max-bytes");
    o.step_bytes = size_or(step_bytes, o.step_bytes, "--step-bytes");
    if (o.min_bytes == 0 || o.max_bytes < o.min_bytes) {
      throw CLI::ValidationError("--min-bytes/--max-bytes", "need 0 < min-bytes <= max-bytes");
    }
    if (o.max_bytes > (4ull << 30)) throw CLI::ValidationError("--max-bytes", "at most 4G");
    if (o.step_bytes < 8) throw CLI::ValidationError("--step-bytes", "at least 8 bytes");

    o.colls.clear();
    std::string list = colls == "all" ? "allreduce,allgather,broadcast" : colls;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      std::string c = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (c == "allreduce") o.colls.push_back(NcclFunc::kAllReduce);
      else if (c == "allgather") o.colls.push_back(NcclFunc::kAllGather);
      else if (c == "broadcast") o.colls.push_back(NcclFunc::kBroadcast);
      else throw CLI::ValidationError("--coll", "'" + c + "' is not one of allreduce, allgather, broadcast, all");
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    if (dtype == "int32") o.dtype = DataType::kInt32;
    else if (dtype == "int64") o.dtype = DataType::kInt64;
    else throw CLI::ValidationError("--dtype", "'" + dtype + "' is not int32 or int64");
    if (backend == "plugin") o.backend = Backend::kPlugin;
    else if (backend == "raw") o.backend = Backend::kRaw;
    else throw CLI::ValidationError("--backend", "'" + backend + "' is not plugin or raw");
    if (o.plugin_path.empty()) o.plugin_path = ff::testing::DefaultPluginPath();
    o.profiler = prof_on ? 1 : prof_off ? 0 : -1;
    o.net_attr = !no_net_attr;

    if (o.launch_local) {
      if (o.launch_ranks < 2) throw CLI::ValidationError("--launch-local", "needs --ranks N (N >= 2)");
      if (o.rank >= 0 || o.nranks > 0 || !o.rendezvous.empty()) {
        throw CLI::ValidationError("--launch-local", "do not combine with --rank/--nranks/--rendezvous");
      }
      o.nranks = o.launch_ranks;
    } else {
      if (o.bench_compare) throw CLI::ValidationError("--bench-compare", "needs --launch-local");
      if (o.rank < 0 || o.nranks < 2 || o.rendezvous.empty()) {
        throw CLI::ValidationError("launch", "give either --ranks N --launch-local, or --rank R --nranks N --rendezvous HOST:PORT");
      }
      if (o.rank >= o.nranks) {
        throw CLI::ValidationError("--rank", std::to_string(o.rank) + " is not in 0.." + std::to_string(o.nranks - 1));
      }
    }
    if (o.root < 0 || o.root >= o.nranks) {
      throw CLI::ValidationError("--root", std::to_string(o.root) + " is not in 0.." + std::to_string(o.nranks - 1));
    }
  } catch (const CLI::CallForHelp& e) {
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    std::cerr << "ff-collective: " << e.what() << " (see --help)\n";
    std::exit(2);
  }
  return o;
}

std::vector<std::string> RankArguments(const Options& o, int rank, int nranks, const std::string& rendezvous,
                                       int rendezvous_fd, Backend backend, const std::string& result_file) {
  std::string colls;
  for (auto f : o.colls) colls += (colls.empty() ? "" : ",") + CollName(f);
  std::vector<std::string> a = {"--rank", std::to_string(rank), "--nranks", std::to_string(nranks),
                                "--rendezvous", rendezvous, "--coll", colls,
                                "--dtype", DataTypeName(o.dtype), "--min-bytes", SizeArg(o.min_bytes),
                                "--max-bytes", SizeArg(o.max_bytes), "--step-bytes", SizeArg(o.step_bytes),
                                "--steps-in-flight", std::to_string(o.window), "--iters", std::to_string(o.iters),
                                "--warmup", std::to_string(o.warmup), "--root", std::to_string(o.root),
                                "--backend", BackendName(backend), "--raw-streams", std::to_string(o.raw_streams),
                                "--plugin", o.plugin_path,
                                "--dev", std::to_string(o.dev_cycle > 0 ? (o.dev + rank * o.dev_step) % o.dev_cycle : o.dev),
                                "--timeout-s", std::to_string(o.timeout_s)};
  if (o.test_all) a.push_back("--test-all");
  if (!o.bind_ip.empty()) a.insert(a.end(), {"--bind-ip", o.bind_ip});
  if (rendezvous_fd >= 0) a.insert(a.end(), {"--rendezvous-fd", std::to_string(rendezvous_fd)});
  if (o.json) a.push_back("--json");
  if (o.profiler >= 0) a.push_back(o.profiler ? "--profiler" : "--no-profiler");
  if (!o.net_attr) a.push_back("--no-net-attr");
  if (!result_file.empty()) a.insert(a.end(), {"--result-file", result_file});
  if (o.inject_corruption) a.push_back("--inject-corruption");
  if (o.inject_exit_rank >= 0) a.insert(a.end(), {"--inject-exit", std::to_string(o.inject_exit_rank)});
  return a;
}

}  // namespace ff::collective
