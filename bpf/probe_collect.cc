// Sampling loop shared by `probe watch` and `probe report`.
#include "bpf/probe_collect.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "bpf/bpf_permission.h"
#include "bpf/plugin_procs.h"
#include "bpf/probe_session.h"
#include "bpf/socket_owners.h"

namespace ff::probe {

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// Attaches to whatever plugin files are mapped now. A file that fails (a build without probes, a
// file replaced on disk) is reported once and not tried again.
void AttachNew(ProbeSession& s, const CollectOptions& o, std::set<std::string>* failed) {
  std::vector<std::string> paths;
  for (const auto& lib : o.libs)
    if (access(lib.c_str(), R_OK) == 0) paths.push_back(lib);
  // Attaching by file with pid -1 covers every process that maps it, present and future.
  if (o.scan)
    for (const auto& m : FindPluginMappings(o.pid > 0 ? o.pid : 0)) paths.push_back(m.path);
  for (const auto& path : paths) {
    if (failed->count(path)) continue;
    std::string error;
    if (!s.AttachPlugin(path, o.pid, &error)) {
      std::fprintf(stderr, "flexiforce probe: skipping %s: %s\n", path.c_str(), error.c_str());
      failed->insert(path);
    }
  }
}

// Notes the TCP sockets of every process that sent a control-plane event (every process with a plugin
// connection does) and of --pid, so that retransmitting sockets can be named after their task.
void ScanOwners(const std::vector<TimelineEvent>& timeline, const CollectOptions& o, std::set<int>* gone, std::map<SocketId, int>* owners) {
  std::set<int> pids;
  for (const auto& e : timeline) pids.insert(e.pid);
  if (o.pid > 0) pids.insert(o.pid);
  for (int pid : pids) {
    if (gone->count(pid)) continue;
    if (access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0) {
      gone->insert(pid);
      continue;
    }
    ScanSocketOwners(pid, "/proc", owners);
  }
}

}  // namespace

int Collect(const CollectOptions& o, const IntervalSink& sink) {
  if (!o.scan && o.libs.empty()) {
    std::fprintf(stderr, "flexiforce probe: --no-scan needs --lib FILE (nothing to attach to otherwise)\n");
    return 2;
  }
  const BpfPermission perm = ReadBpfPermission();
  if (!perm.permitted) {
    std::fprintf(stderr, "flexiforce probe: BPF is not permitted for this process: %s\n", perm.missing.c_str());
    return 1;
  }
  std::string error;
  auto session = ProbeSession::Open(&error);
  if (!session) {
    std::fprintf(stderr, "flexiforce probe: %s\n", error.c_str());
    return 1;
  }
  session->set_attach_posts(o.posts);
  std::set<std::string> failed;
  AttachNew(*session, o, &failed);
  if (o.pid > 0 && session->attached().empty()) {
    std::fprintf(stderr, "flexiforce probe: process %d does not map %s\n", o.pid, kPluginFileName);
    return 1;
  }
  std::fprintf(stderr, "flexiforce probe: attached to %zu plugin file(s)%s\n", session->attached().size(),
               session->attached().empty() ? "; waiting for a process to load the plugin" : "");
  if (!o.ready_file.empty()) std::ofstream(o.ready_file) << "attached\n";
  g_stop.store(false);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Snapshot before = session->Read();
  const Snapshot origin = before;
  if (o.on_start) o.on_start();
  // New copies of the plugin are looked for at least once a second, whatever the interval (report's
  // single interval is its whole duration); the file's later processes are covered once it is attached.
  const auto rescan_every = std::chrono::duration<double>(std::min(o.interval_s, 1.0));
  auto last_scan = start;
  std::map<SocketId, int> owners;
  std::set<int> gone;
  auto last_owner_scan = start;
  // Sockets change hands only when a path comes up (connect, accept, failback), and each of those is
  // an event; reading /proc/PID/net/tcp walks the kernel's whole TCP table (about 10 ms of system
  // time each here, the tool's main cost while a job runs), so the owners are read again only when
  // events arrived since the last read (and once at the start).
  uint64_t owners_read_at = UINT64_MAX;
  auto scan_owners_if_news = [&] {
    if (session->events_read() == owners_read_at) return;
    owners_read_at = session->events_read();
    ScanOwners(session->timeline(), o, &gone, &owners);
  };
  for (int tick = 1;; ++tick) {
    const auto due = start + std::chrono::duration<double>(o.interval_s * tick);
    bool last = false;
    while (Clock::now() < due) {
      if (g_stop.load()) {
        last = true;
        break;
      }
      // Sleeps until the next thing is due (the interval, a rescan, an owner scan): a ring-buffer
      // record or a signal wakes it sooner. A fixed short pace woke the tool 50 times a second, and
      // on a host whose CPUs the job's busy-polling ranks fill, each wake-up takes a rank off its CPU.
      Clock::time_point next = std::chrono::time_point_cast<Clock::duration>(due);
      if (o.pid <= 0) next = std::min(next, last_scan + std::chrono::duration_cast<Clock::duration>(rescan_every));
      next = std::min(next, last_owner_scan + std::chrono::seconds(1));
      const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1;
      session->PollEvents(static_cast<int>(std::clamp<int64_t>(wait_ms, 1, 1000)));
      if (o.pid <= 0 && Clock::now() - last_scan >= rescan_every) {
        AttachNew(*session, o, &failed);
        last_scan = Clock::now();
      }
      if (Clock::now() - last_owner_scan >= std::chrono::seconds(1)) {
        session->PollEvents(0);
        scan_owners_if_news();
        last_owner_scan = Clock::now();
      }
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (o.duration_s > 0 && elapsed + 1e-3 >= o.duration_s) last = true;
    Snapshot now = session->Read();
    scan_owners_if_news();
    now.socket_owners = owners;
    Snapshot total = Difference(now, origin);
    total.timeline = now.timeline;  // every event since the probe attached
    total.timeline_dropped = now.timeline_dropped;
    total.socket_owners = owners;
    Snapshot interval = Difference(now, before);
    interval.socket_owners = owners;
    sink(interval, total, elapsed, last);
    if (last) break;
    before = std::move(now);
  }
  return 0;
}

}  // namespace ff::probe
