// Entry point of the `flexiforce` command-line program: dispatches to component subcommands.
#include <cstdio>
#include <cstring>
#include <iterator>

#include "cli/subcommands.h"

// Each component declares its entry point in its own header; the table below lists them.
namespace ff {
int RunConfigCommand(int argc, char** argv);  // plugin/config_cli.cc
int RunBenchCommand(int argc, char** argv);   // cli/bench.cc
#ifdef FF_HAVE_PATHCTL_CLI
int RunPathCommand(int argc, char** argv);    // pathctl/path_cli.cc
int RunHealthCommand(int argc, char** argv);  // pathctl/health_cli.cc
#endif
#ifdef FF_HAVE_STATS_CLI
int RunStatsCommand(int argc, char** argv);  // sla/stats_cli.cc
#endif
#ifdef FF_HAVE_TOPO_CLI
int RunTopoCommand(int argc, char** argv);  // pcie/topo_cli.cc
#endif
#ifdef FF_HAVE_PROBE_CLI
int RunProbeCommand(int argc, char** argv);  // bpf/probe_cli.cc
#endif
}  // namespace ff

namespace {

const ff::cli::Subcommand kSubcommands[] = {
    {"config", "the job variables (SLA, task id, steer) and every knob: default, value, meaning (--json, --markdown)", ff::RunConfigCommand},
    {"bench", "benchmark the plugin against raw TCP sockets between two processes", ff::RunBenchCommand},
#ifdef FF_HAVE_PATHCTL_CLI
    {"path", "path oracle: rank (SLA-aware ranking), gen (topologies), check (validate a file), bench", ff::RunPathCommand},
    {"health", "NIC soft health: error counters, FEC, RDMA port counters, PCIe link", ff::RunHealthCommand},
#endif
#ifdef FF_HAVE_TOPO_CLI
    {"topo", "GPU x NIC PCIe distances (PIX..SYS), NUMA/CPU affinity, PCIe link health", ff::RunTopoCommand},
#endif
#ifdef FF_HAVE_STATS_CLI
    {"stats", "read a running job's per-task, per-collective statistics", ff::RunStatsCommand},
#endif
#ifdef FF_HAVE_PROBE_CLI
    {"probe", "host preflight (check); BPF view of the plugin's probes (watch, report: the baseline report)", ff::RunProbeCommand},
#endif
};

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: flexiforce <command> [options]\n\n"
               "FlexiForce: an NCCL network plugin that makes the network serve AI training.\n\n"
               "commands:\n");
  for (const auto& s : kSubcommands) std::fprintf(out, "  %-8s %s\n", s.name, s.summary);
  std::fprintf(out, "\nRun 'flexiforce <command> --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  ff::cli::g_subcommand_table = {kSubcommands, std::size(kSubcommands)};
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintUsage(stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("flexiforce %s\n", FF_VERSION);
    return 0;
  }
  for (const auto& s : kSubcommands) {
    if (!std::strcmp(argv[1], s.name)) return s.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "flexiforce: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
