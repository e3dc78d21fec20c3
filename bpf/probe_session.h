// A loaded probe: the BPF object, its links to the plugin's USDT probes and the TCP tracepoint.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bpf/probe_snapshot.h"

struct probe_bpf;
struct bpf_link;

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
  // One entry per attached {pid, file} ("pid:device:inode").
  const std::set<std::string>& attached() const { return attached_; }

  // Reads every map (cumulative counters since Open).
  Snapshot Read() const;

 private:
  ProbeSession() = default;
  struct SkeletonDeleter {
    void operator()(probe_bpf* s) const;
  };
  struct LinkDeleter {
    void operator()(bpf_link* l) const;
  };
  std::unique_ptr<probe_bpf, SkeletonDeleter> skel_;
  // Declared after skel_ so links are destroyed first.
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> links_;
  std::set<std::string> attached_;
};

}  // namespace ff::probe
