// `flexiforce probe`: check (preflight, no BPF), watch (live table) and report (files) subcommands.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <fstream>
#include <string>

#include "bpf/preflight.h"

#ifdef FF_HAVE_BPF_PROBE
#include "bpf/hidden_loss.h"
#include "bpf/probe_collect.h"
#include "bpf/report_analysis.h"
#include "pathctl/topology_json.h"
#endif

namespace ff {

namespace {

int RunCheck(int argc, char** argv) {
  CLI::App app{
      "Preflight of this host for a FlexiForce job: interfaces, RDMA devices and GIDs, the job's environment\n"
      "as the plugin parses it, room for statistics, BPF permission. Exit 1 when something would stop a job.",
      "flexiforce probe check"};
  bool json = false;
  probe::PreflightInputs in;
  in.env = sla::ProcessEnv();
  app.add_flag("--json", json, "print the findings as JSON");
  app.add_option("--sysfs", in.sysfs_root, "sysfs root (tests use fixture trees)")->capture_default_str();
  app.add_option("--shm", in.shm_dir, "statistics directory")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const probe::Findings f = probe::RunPreflight(in);
  const bool bad = probe::AnyError(f);
  if (json) {
    nlohmann::json j;
    j["ok"] = !bad;
    j["findings"] = nlohmann::json::array();
    for (const auto& x : f)
      j["findings"].push_back(
          {{"severity", probe::SeverityName(x.severity)}, {"topic", x.topic}, {"message", x.message}, {"detail", x.detail}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& x : f) std::printf("%-5s %-9s %s\n", probe::SeverityName(x.severity), x.topic.c_str(), x.message.c_str());
  }
  return bad ? 1 : 0;
}

#ifdef FF_HAVE_BPF_PROBE

void AddCollectOptions(CLI::App& app, probe::CollectOptions& o) {
  app.add_option("--pid", o.pid, "only this process (default: every process that maps the plugin)")
      ->check(CLI::PositiveNumber);
  app.add_option("--lib", o.libs, "plugin file to attach to even before a process loads it (repeatable)");
  app.add_flag_callback("--no-scan", [&o] { o.scan = false; },
                        "attach to the --lib files only, not to every copy of the plugin found in /proc/*/maps");
  app.add_flag("--posts", o.posts,
               "also count posted sends and receives (send_post/recv_post): two more probe hits per message");
  app.add_option("--interval", o.interval_s, "seconds per sample")->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  app.add_option("--ready-file", o.ready_file, "create this file once the probes are attached");
}

void PrintTable(const probe::Snapshot& s, double elapsed, double interval) {
  std::time_t t = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof(when), "%H:%M:%S", std::localtime(&t));
  std::printf("--- %s  %.1f s", when, elapsed);
  for (int i = 0; i < FF_EV_COUNT; ++i)
    if (s.events[static_cast<size_t>(i)]) std::printf("  %s %llu", probe::EventName(i), static_cast<unsigned long long>(s.events[static_cast<size_t>(i)]));
  std::printf("\n%-20s %-14s %-4s %-22s %5s %8s %9s %9s %9s %7s %7s\n", "TASK", "COLLECTIVE", "DIR", "PEER", "PATH",
              "MSGS", "MB/s", "MEAN_us", "P99_us", "SLA_us", "MISSED");
  for (const auto& [id, c] : s.flows) {
    std::printf("%-20.20s %-14s %-4s %-22.22s %5s %8llu %9.1f %9.1f %9.1f %7llu %7llu\n", id.task.c_str(),
                id.collective.c_str(), id.dir.c_str(), id.peer.c_str(),
                id.path < 0 ? "*" : std::to_string(id.path).c_str(), static_cast<unsigned long long>(c.messages),
                static_cast<double>(c.bytes) / interval / 1e6,
                c.messages ? static_cast<double>(c.latency_sum_ns) / static_cast<double>(c.messages) / 1e3 : 0.0,
                static_cast<double>(c.QuantileNs(0.99)) / 1e3, static_cast<unsigned long long>(c.sla_us),
                static_cast<unsigned long long>(c.sla_violations));
  }
  for (const auto& e : s.timeline)
    std::printf("event %s pid %d task %s %s peer %s path %s %s\n", probe::IsoTime(e.wall_s).c_str(), e.pid,
                e.task.c_str(), e.event.c_str(), e.peer.c_str(), e.path < 0 ? "-" : std::to_string(e.path).c_str(),
                e.details.dump().c_str());
  for (const auto& [id, n] : s.retransmits)
    std::printf("retransmits %s -> %s: %llu\n", id.local.c_str(), id.remote.c_str(), static_cast<unsigned long long>(n));
  std::fflush(stdout);
}

int RunWatch(int argc, char** argv) {
  CLI::App app{"Live per-task, per-collective, per-peer, per-path table from the plugin's USDT probes, and TCP\n"
               "retransmits by socket. Needs root, or CAP_BPF + CAP_PERFMON.",
               "flexiforce probe watch"};
  probe::CollectOptions o;
  bool json = false;
  AddCollectOptions(app, o);
  app.add_option("--duration", o.duration_s, "stop after this many seconds (default: until Ctrl-C)");
  app.add_flag("--json", json, "one JSON object per interval; the last one also carries the totals");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  double prev = 0;
  return probe::Collect(o, [&](const probe::Snapshot& iv, const probe::Snapshot& total, double elapsed, bool last) {
    if (json) {
      nlohmann::json j;
      j["elapsed_s"] = elapsed;
      j["interval"] = probe::SnapshotJson(iv);
      j["final"] = last;
      if (last) j["total"] = probe::SnapshotJson(total);
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    } else {
      PrintTable(iv, elapsed, elapsed - prev > 0 ? elapsed - prev : o.interval_s);
      if (last) {
        std::printf("=== totals\n");
        PrintTable(total, elapsed, elapsed > 0 ? elapsed : 1);
      }
    }
    prev = elapsed;
  });
}

int RunReport(int argc, char** argv) {
  CLI::App app{"Observe for a while, then write report.json, report.md and report.html (inline SVG latency\n"
               "histograms with the SLA line, peer heat map): tasks missing their SLA, outlier peer pairs,\n"
               "retransmits, hot spots, hidden loss (per NIC: FEC blocks and error rate, RDMA loss counters over\n"
               "the window). Needs root, or CAP_BPF + CAP_PERFMON.",
               "flexiforce probe report"};
  probe::CollectOptions o;
  std::string out;
  o.duration_s = 10;
  AddCollectOptions(app, o);
  app.add_option("--duration", o.duration_s, "seconds to observe")->check(CLI::Range(0.05, 86400.0))->capture_default_str();
  app.add_option("--out", out, "directory for the report files")->required();
  std::string topology_file;
  app.add_option("--topology", topology_file,
                 "fabric topology (pathctl's JSON format): hot spots become links on which one task sends > 80% of the bytes");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::optional<pathctl::Topology> topology;
  if (!topology_file.empty()) {
    std::string error;
    topology = pathctl::LoadTopologyFile(topology_file, &error);
    if (!topology) {
      std::fprintf(stderr, "flexiforce probe report: %s: %s\n", topology_file.c_str(), error.c_str());
      return 2;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "flexiforce probe report: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  if (o.interval_s < o.duration_s) o.interval_s = o.duration_s;  // nothing to print meanwhile
  // Hidden loss: every interface's FEC and RDMA loss counters at the window's two ends.
  probe::HiddenLossSampler nics("");
  std::vector<probe::NicLossSample> nics_start;
  o.on_start = [&] { nics_start = nics.Sample(); };
  int rc = probe::Collect(o, [&](const probe::Snapshot&, const probe::Snapshot& total, double elapsed, bool last) {
    if (!last) return;
    probe::ReportFindings f = probe::Analyze(total, topology ? &*topology : nullptr);
    f.hidden_loss = probe::HiddenLoss(nics_start, nics.Sample(),
                                      probe::PathInterfaces(total.timeline, probe::InterfaceOfLocalAddress));
    std::ofstream(out + "/report.json") << probe::ReportJson(total, f, elapsed).dump(2) << "\n";
    std::ofstream(out + "/report.md") << probe::ReportMarkdown(total, f, elapsed);
    std::ofstream(out + "/report.html") << probe::ReportHtml(total, f, elapsed);
    size_t flagged = 0;
    for (const auto& n : f.hidden_loss["nics"]) flagged += n["flagged"].get<bool>() ? 1 : 0;
    std::printf("wrote %s/report.{json,md,html}: %zu task(s) missing their SLA, %zu outlier pair(s), %zu socket(s) "
                "retransmitting, %zu hot spot(s), %zu NIC(s) with hidden loss\n",
                out.c_str(), f.sla_misses.size(), f.outlier_pairs.size(), f.retransmits.size(), f.hot_spots.size(),
                flagged);
  });
  return rc;
}

#endif

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: flexiforce probe <check|watch|report> [options]\n\n"
               "  check   preflight of this host for a job (no BPF needed)\n"
#ifdef FF_HAVE_BPF_PROBE
               "  watch   live table from the plugin's USDT probes (BPF; root or CAP_BPF + CAP_PERFMON)\n"
               "  report  observe, then write JSON, Markdown and HTML reports (BPF)\n"
#else
               "  (watch and report were not built: clang, bpftool or libbpf-dev was missing)\n"
#endif
  );
}

}  // namespace

int RunProbeCommand(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  if (sub == "check") return RunCheck(argc - 1, argv + 1);
#ifdef FF_HAVE_BPF_PROBE
  if (sub == "watch") return RunWatch(argc - 1, argv + 1);
  if (sub == "report") return RunReport(argc - 1, argv + 1);
#endif
  std::fprintf(stderr, "flexiforce probe: unknown subcommand '%s'\n\n", sub.c_str());
  Usage(stderr);
  return 2;
}

}  // namespace ff
