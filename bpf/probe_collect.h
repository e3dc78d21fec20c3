// The probe's sampling loop: check permission, load, attach to the plugin wherever it is mapped, sample.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bpf/probe_snapshot.h"

namespace ff::probe {

struct CollectOptions {
  int pid = -1;                    // -1: every process that maps the plugin
  std::vector<std::string> libs;   // plugin files to attach to even before any process maps them
  bool scan = true;                // also attach to every copy of the plugin that /proc/*/maps shows
  bool posts = false;              // also attach send_post/recv_post (two more probe hits per message)
  double interval_s = 1.0;
  double duration_s = 0;           // 0: until SIGINT/SIGTERM
  std::string ready_file;          // created once the probes are attached (for scripts and tests)
  std::function<void()> on_start;  // called when the window starts (the first sample), if set
};

// Called once per interval with that interval's counters and the totals so far; `last` on the final call.
using IntervalSink = std::function<void(const Snapshot& interval, const Snapshot& total, double elapsed_s, bool last)>;

// Runs the loop; returns the exit status (1 without BPF permission or when loading fails, after
// printing why to stderr). New processes that map another copy of the plugin are picked up each interval.
int Collect(const CollectOptions& o, const IntervalSink& sink);

}  // namespace ff::probe
