// `flexiforce stats`: reads the per-process statistics files of running jobs.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sla/stats_render.h"
#include "sla/task_stats.h"

namespace ff {

int RunStatsCommand(int argc, char** argv) {
  CLI::App app{
      "Read FlexiForce's per-process statistics (bytes, messages, latency per task, collective, peer and path;\n"
      "per-task heat, SLA misses and failovers) from the shared-memory files of running jobs. A path is named\n"
      "by what it is: local interface, addresses and the spine the oracle chose (\"eth0 10.0.0.1 -> 10.0.0.2\n"
      "via spine1\"); --json also keeps the oracle's numeric path id.",
      "flexiforce stats"};
  int64_t pid = 0;
  bool all = false, json = false, prometheus = false, gc = false, include_stale = false;
  const char* env_dir = std::getenv("FLEXIFORCE_STATS_DIR");
  std::string dir = env_dir && *env_dir ? env_dir : sla::kStatsDefaultDir;
  auto* pid_opt = app.add_option("--pid", pid, "only this process")->check(CLI::PositiveNumber);
  app.add_flag("--all", all, "every process with a statistics file (the default)")->excludes(pid_opt);
  auto* json_flag = app.add_flag("--json", json, "print JSON");
  app.add_flag("--prometheus", prometheus,
               "print Prometheus text format (for node_exporter's textfile collector)")
      ->excludes(json_flag);
  app.add_flag("--include-stale", include_stale, "also show files of processes that no longer run");
  app.add_flag("--gc", gc,
               "remove statistics files of processes that no longer run, then exit (every one: those kept with "
               "FLEXIFORCE_STATS_KEEP=1 too; a job's start removes only killed or crashed ones beyond "
               "FLEXIFORCE_STATS_KEEP_CRASHED)");
  app.add_option("--dir", dir, "directory of the statistics files (FLEXIFORCE_STATS_DIR)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (gc) {
    std::vector<std::string> skipped;
    for (const auto& path : sla::RemoveStaleStatsFiles(dir, &skipped)) std::printf("removed %s\n", path.c_str());
    for (const auto& why : skipped) std::fprintf(stderr, "flexiforce stats: skipping %s\n", why.c_str());
    return 0;
  }

  std::vector<sla::StatsSnapshot> snaps;
  int rc = 0;
  if (pid_opt->count() > 0) {
    std::string error;
    auto snap = sla::ReadStatsFile(sla::StatsFilePath(dir, pid), &error);
    if (!snap) {
      std::fprintf(stderr, "flexiforce stats: no statistics for pid %lld: %s\n", static_cast<long long>(pid),
                   error.c_str());
      return 1;
    }
    if (!snap->alive) std::fprintf(stderr, "flexiforce stats: pid %lld no longer runs; showing its last numbers\n",
                                   static_cast<long long>(pid));
    snaps.push_back(std::move(*snap));
  } else {
    for (const auto& [file_pid, path] : sla::ListStatsFiles(dir)) {
      std::string error;
      auto snap = sla::ReadStatsFile(path, &error);
      if (!snap) {
        std::fprintf(stderr, "flexiforce stats: skipping %s\n", error.c_str());
        continue;
      }
      if (!snap->alive && !include_stale) continue;  // a crashed job's leftovers; --gc removes them
      snaps.push_back(std::move(*snap));
    }
  }
  const std::string out = json         ? sla::RenderStatsJson(snaps)
                          : prometheus ? sla::RenderStatsPrometheus(snaps)
                                       : sla::RenderStatsText(snaps);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return rc;
}

}  // namespace ff
