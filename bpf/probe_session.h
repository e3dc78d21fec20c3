// A loaded probe: the BPF object, its links to the plugin's USDT probes and the TCP tracepoint.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bpf/probe_snapshot.h"

struct probe_bpf;
struct bpf_link;
struct ring_buffer;

namespace ff::probe {

class ProbeSession {
 public:
  // Opens and loads the BPF programs and attaches the retransmit tracepoint. nullptr with `error` set.
  static std::unique_ptr<ProbeSession> Open(std::string* error);
  ~ProbeSession();
  ProbeSession(const ProbeSession&) = delete;
  ProbeSession& operator=(const ProbeSession&) = delete;

  // Attaches every USDT program to the plugin file `path`, in process `pid` (-1: every process that
  // maps it, now or later). A file already attached for `pid`, under whatever name, is skipped.
  // False with `error` set on failure.
  bool AttachPlugin(const std::string& path, int pid, std::string* error);
  // Whether AttachPlugin also attaches send_post/recv_post (off by default: they only count posts,
  // and each is one more uprobe hit per message in the job).
  void set_attach_posts(bool on) { attach_posts_ = on; }
  // One entry per attached {pid, file} ("pid:device:inode").
  const std::set<std::string>& attached() const { return attached_; }

  // Reads every map (cumulative counters since Open), and every event received so far.
  Snapshot Read();

  // Waits up to `timeout_ms` for control-plane events and takes what the ring buffer holds.
  void PollEvents(int timeout_ms);

  // The events received so far (no map reads).
  const std::vector<TimelineEvent>& timeline() const { return timeline_; }
  // Events read from the ring so far, kept or over the timeline's cap: changes whenever one arrives.
  uint64_t events_read() const { return timeline_.size() + capped_; }

  // At most this many events are kept; later ones are counted as dropped.
  static constexpr size_t kMaxTimeline = 200000;

 private:
  ProbeSession() = default;
  struct SkeletonDeleter {
    void operator()(probe_bpf* s) const;
  };
  struct LinkDeleter {
    void operator()(bpf_link* l) const;
  };
  struct RingDeleter {
    void operator()(ring_buffer* r) const;
  };
  static int OnEvent(void* ctx, void* data, size_t size);
  // Fills in the task of events that lack one: from the flows' task names, or the process's environment.
  void ResolveTasks();

  std::unique_ptr<probe_bpf, SkeletonDeleter> skel_;
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  double mono_to_wall_s_ = 0;
  std::vector<TimelineEvent> timeline_;
  uint64_t capped_ = 0;
  bool attach_posts_ = false;
  std::map<uint64_t, std::string> task_names_;   // task hash -> task id, from the flow keys
  std::map<int, std::vector<std::string>> environ_ids_;  // pid -> candidate task ids in its environment
  // Declared after skel_ so links are destroyed first.
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> links_;
  std::set<std::string> attached_;
};

}  // namespace ff::probe
