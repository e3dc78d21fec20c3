// libbpf side of the probe: skeleton lifetime, USDT/tracepoint attachment, map reading.
#include "bpf/probe_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <utility>

#include "probe.skel.h"

namespace ff::probe {

namespace {

// libbpf prints its own diagnostics; keep only warnings and worse, and only when asked to.
int QuietPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG || std::getenv("FLEXIFORCE_PROBE_DEBUG") == nullptr) return 0;
  return std::vfprintf(stderr, fmt, args);
}

struct UsdtProgram {
  bpf_program* prog;
  const char* probe;
  bool optional = false;  // newer than some plugin builds: attached where the file has it
  bool post = false;      // send_post/recv_post: attached only when asked (set_attach_posts)
  bool per_message = false;  // send_done/recv_done: only where the file has no msgs_done (older builds)
};

}  // namespace

void ProbeSession::SkeletonDeleter::operator()(probe_bpf* s) const { probe_bpf__destroy(s); }
void ProbeSession::LinkDeleter::operator()(bpf_link* l) const { bpf_link__destroy(l); }
void ProbeSession::RingDeleter::operator()(ring_buffer* r) const { ring_buffer__free(r); }

int ProbeSession::OnEvent(void* ctx, void* data, size_t size) {
  auto* self = static_cast<ProbeSession*>(ctx);
  if (size < sizeof(ff_event)) return 0;
  if (self->timeline_.size() >= kMaxTimeline) {
    ++self->capped_;
    return 0;
  }
  ff_event r;
  std::memcpy(&r, data, sizeof(r));
  self->timeline_.push_back(TimelineEventFromRecord(r, self->mono_to_wall_s_));
  // The process may be gone by the time the report is written: note its candidate task ids now.
  const int pid = self->timeline_.back().pid;
  if (!self->environ_ids_.count(pid)) {
    std::vector<std::string>& ids = self->environ_ids_[pid];
    std::ifstream f("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t start = 0;
    while (start < env.size()) {
      size_t end = env.find('\0', start);
      if (end == std::string::npos) end = env.size();
      const std::string var = env.substr(start, end - start);
      const size_t eq = var.find('=');
      if (eq != std::string::npos) ids.push_back(var.substr(eq + 1));
      start = end + 1;
    }
  }
  return 0;
}

void ProbeSession::PollEvents(int timeout_ms) {
  if (ring_) ring_buffer__poll(ring_.get(), timeout_ms);
}

void ProbeSession::ResolveTasks() {
  for (auto& e : timeline_) {
    if (!e.task.empty()) continue;
    if (auto it = task_names_.find(e.task_hash); it != task_names_.end()) {
      e.task = it->second;
      continue;
    }
    // Any value of the process's environment whose hash matches (AI_TASK_ID, a launcher's job id).
    if (auto it = environ_ids_.find(e.pid); it != environ_ids_.end())
      for (const auto& id : it->second)
        if (TaskHash(id) == e.task_hash) {
          e.task = id;
          task_names_[e.task_hash] = id;
          break;
        }
  }
}

std::unique_ptr<ProbeSession> ProbeSession::Open(std::string* error) {
  libbpf_set_print(QuietPrint);
  std::unique_ptr<ProbeSession> s(new ProbeSession());
  s->skel_.reset(probe_bpf__open());
  if (!s->skel_) {
    *error = std::string("cannot open the BPF object: ") + std::strerror(errno);
    return nullptr;
  }
  if (int err = probe_bpf__load(s->skel_.get()); err != 0) {
    *error = std::string("cannot load the BPF programs: ") + std::strerror(-err) +
             (err == -EPERM ? " (run as root, or grant CAP_BPF + CAP_PERFMON)" : "");
    return nullptr;
  }
  bpf_link* tp = bpf_program__attach(s->skel_->progs.tcp_retransmit);
  if (tp == nullptr) {
    *error = std::string("cannot attach to tcp/tcp_retransmit_skb: ") + std::strerror(errno);
    return nullptr;
  }
  s->links_.emplace_back(tp);
  timespec mono{}, real{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  s->mono_to_wall_s_ = (static_cast<double>(real.tv_sec) + real.tv_nsec / 1e9) -
                       (static_cast<double>(mono.tv_sec) + mono.tv_nsec / 1e9);
  s->ring_.reset(ring_buffer__new(bpf_map__fd(s->skel_->maps.event_ring), &ProbeSession::OnEvent, s.get(), nullptr));
  if (!s->ring_) {
    *error = std::string("cannot open the event ring buffer: ") + std::strerror(errno);
    return nullptr;
  }
  return s;
}

ProbeSession::~ProbeSession() {
  links_.clear();  // detach before the programs go
  ring_.reset();
}

bool ProbeSession::AttachPlugin(const std::string& path, int pid, std::string* error) {
  // Keyed by the file, not its name: --lib given as a relative path or through a symlink and the
  // path /proc/PID/maps shows are one file, and attaching it twice counted every message twice.
  std::string key = std::to_string(pid) + ":";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    key += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  else
    key += path;
  if (attached_.count(key)) return true;
  auto& p = skel_->progs;
  // Completed messages come in batches (msgs_done, one hit per up to 32 messages: core/probe_batch.h);
  // a plugin built before that has only the per-message probes, one hit each.
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> fresh;
  bool batched = true;
  if (bpf_link* l = bpf_program__attach_usdt(p.msgs_done, pid, path.c_str(), "flexiforce", "msgs_done", nullptr)) {
    fresh.emplace_back(l);
  } else {
    batched = false;
    std::fprintf(stderr, "flexiforce probe: %s has no USDT flexiforce:msgs_done (an older build): counting "
                 "send_done/recv_done, one uprobe hit per message\n", path.c_str());
  }
  const UsdtProgram programs[] = {
      {p.send_post, "send_post", false, true}, {p.send_done, "send_done", false, false, true},
      {p.recv_post, "recv_post", false, true}, {p.recv_done, "recv_done", false, false, true},
      {p.on_connect, "connect"},  {p.on_accept, "accept"},
      {p.path_choice, "path_choice"}, {p.failover, "failover"},   {p.drain, "drain"},
      {p.failback, "failback"},       {p.on_pause, "pause"},      {p.on_resume, "resume"},
      {p.path_up, "path_up", true},
  };
  for (const auto& u : programs) {
    if (u.post && !attach_posts_) continue;
    if (u.per_message && batched) continue;
    bpf_link* l = bpf_program__attach_usdt(u.prog, pid, path.c_str(), "flexiforce", u.probe, nullptr);
    if (l == nullptr && u.optional) {
      std::fprintf(stderr, "flexiforce probe: %s has no USDT flexiforce:%s (an older build): its path sockets are not named\n",
                   path.c_str(), u.probe);
      continue;
    }
    if (l == nullptr) {
      *error = "cannot attach to USDT flexiforce:" + std::string(u.probe) + " in " + path + ": " + std::strerror(errno);
      return false;  // `fresh` detaches what this call attached
    }
    fresh.emplace_back(l);
  }
  for (auto& l : fresh) links_.push_back(std::move(l));
  attached_.insert(key);
  return true;
}

Snapshot ProbeSession::Read() {
  PollEvents(0);
  Snapshot s;
  const int flows = bpf_map__fd(skel_->maps.flows);
  ff_flow_key k{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(flows, prev, &next) == 0) {
    ff_flow_stats v{};
    if (bpf_map_lookup_elem(flows, &next, &v) == 0) {
      // Merge: two raw keys that differ only in the task hash show as one row.
      FlowCounters c = CountersFromValue(v);
      const FlowId id = FlowIdFromKey(next);
      task_names_.emplace(next.task_hash, id.task);
      FlowCounters& row = s.flows[id];
      row.messages += c.messages;
      row.bytes += c.bytes;
      row.latency_sum_ns += c.latency_sum_ns;
      row.sla_violations += c.sla_violations;
      row.sla_us = c.sla_us;
      for (size_t i = 0; i < row.hist.size(); ++i) row.hist[i] += c.hist[i];
    }
    k = next;
    prev = &k;
  }
  const int rt = bpf_map__fd(skel_->maps.retransmits);
  ff_sock_key sk{}, snext{};
  const void* sprev = nullptr;
  while (bpf_map_get_next_key(rt, sprev, &snext) == 0) {
    uint64_t n = 0;
    if (bpf_map_lookup_elem(rt, &snext, &n) == 0) s.retransmits[SocketIdFromKey(snext)] += n;
    sk = snext;
    sprev = &sk;
  }
  const int ev = bpf_map__fd(skel_->maps.events);
  for (uint32_t i = 0; i < FF_EV_COUNT; ++i) {
    uint64_t n = 0;
    if (bpf_map_lookup_elem(ev, &i, &n) == 0) s.events[i] = n;
  }
  uint32_t zero = 0;
  uint64_t drops = 0;
  bpf_map_lookup_elem(bpf_map__fd(skel_->maps.ring_drops), &zero, &drops);
  s.timeline_dropped = drops + capped_;
  s.posts_counted = attach_posts_;
  ResolveTasks();
  s.timeline = timeline_;
  return s;
}

}  // namespace ff::probe
