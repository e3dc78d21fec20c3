// Failback over verbs: a new queue pair over a rejoin stream (see verbs_reconnect.h).
#include "plugin/verbs_reconnect.h"

#include <net/if.h>
#include <unistd.h>

#include <utility>

#include "base/logging.h"
#include "health/link_monitor.h"
#include "tcp/interfaces.h"
#include "verbs/rdma_sysfs.h"

namespace ff {

bool VerbsPortReady(verbs::RdmaDevice& dev, bool link_events, uint64_t now_ns, uint64_t stable_ns) {
  if (dev.events != nullptr) {
    dev.events->PollIfDue(now_ns);
    if (dev.events->PortDown(dev.port)) return false;
  }
  if (const auto state = verbs::ReadSysfsLine(verbs::IbPortDir("/", dev.name, dev.port) + "/state");
      state && state->find("ACTIVE") == std::string::npos)
    return false;
  if (!link_events || dev.netdev.empty()) return true;
  const int ifindex = static_cast<int>(if_nametoindex(dev.netdev.c_str()));
  if (ifindex <= 0) return true;
  LinkMonitor::Get().Poll(now_ns);
  return LinkMonitor::Get().StableUp(ifindex, now_ns, stable_ns);
}

VerbsReconnector::VerbsReconnector(uint64_t conn_id, const ConnectionKey& key, int path_count, uint64_t chunk_bytes,
                                   uint32_t sla_us, PathEndpoint bootstrap, std::vector<VerbsPathRecipe> paths,
                                   tcp::PathSocketOptions socket_options, bool link_events, uint64_t setup_ns)
    : conn_id_(conn_id),
      key_(key),
      path_count_(path_count),
      chunk_bytes_(chunk_bytes),
      sla_us_(sla_us),
      bootstrap_(bootstrap),
      paths_(std::move(paths)),
      socket_options_(socket_options),
      link_events_(link_events),
      setup_ns_(setup_ns) {}

bool VerbsReconnector::Ready(int index, uint64_t now_ns, uint64_t stable_ns) {
  if (!Valid(index) || paths_[static_cast<size_t>(index)].dev == nullptr) return false;
  const Attempt& a = attempts_[static_cast<size_t>(index)];
  if (a.dial.active() || a.setup != nullptr) return true;
  if (!VerbsPortReady(*paths_[static_cast<size_t>(index)].dev, link_events_, now_ns, stable_ns)) return false;
  // The rejoin stream leaves from the bootstrap interface, which may be the failed port's own.
  if (!link_events_) return true;
  const int bootstrap_if = tcp::InterfaceIndexOfAddress(bootstrap_.local);
  if (bootstrap_if <= 0) return true;
  LinkMonitor::Get().Poll(now_ns);  // rate-limited inside; VerbsPortReady may have polled already
  return LinkMonitor::Get().StableUp(bootstrap_if, now_ns, stable_ns);
}

void VerbsReconnector::Abandon(int index) {
  if (!Valid(index)) return;
  Attempt& a = attempts_[static_cast<size_t>(index)];
  a.dial.Reset();
  a.setup.reset();  // destroys the half-made QP
  a.socket.reset();
  a.stream.clear();
}

Reconnector::Step VerbsReconnector::Advance(int index, uint64_t now_ns, std::unique_ptr<Path>* out,
                                            std::string* detail) {
  if (!Valid(index) || paths_[static_cast<size_t>(index)].dev == nullptr) {
    *detail = "no queue pair recipe recorded for path " + std::to_string(index);
    return Step::kFailed;
  }
  Attempt& a = attempts_[static_cast<size_t>(index)];
  const VerbsPathRecipe& recipe = paths_[static_cast<size_t>(index)];
  if (a.setup == nullptr && !a.dial.active()) {
    a.deadline_ns = now_ns + setup_ns_;
    const HelloWire hello = NewRejoinHello(key_, conn_id_, path_count_, index, chunk_bytes_, sla_us_,
                                           ++rejoin_counter_, now_ns);
    Status s = a.dial.Start(bootstrap_, RejoinAddress(bootstrap_, port_), hello, a.deadline_ns);
    if (!s.ok()) {
      *detail = s.message();
      return Step::kFailed;
    }
  }
  if (a.setup == nullptr) {
    const Step step = a.dial.Advance(now_ns, socket_options_, detail);
    if (step != Step::kDone) return step;
    a.stream = *detail;
    a.socket = a.dial.TakeSocket();
    // The new QP (a new QPN), on the path's port with its first options: same key slot, same label.
    Status s = VerbsPathSetup::Create(VerbsPathSetup::Role::kConnector, index, *recipe.dev, recipe.options, &a.setup);
    if (!s.ok()) {
      *detail = "cannot create a queue pair on " + recipe.dev->name + ":" + std::to_string(recipe.dev->port) + ": " +
                s.message();
      Abandon(index);
      return Step::kFailed;
    }
  }
  bool done = false;
  Status s = a.setup->Step(a.socket.fd(), &done);
  if (!s.ok()) {
    *detail = "RDMA setup over " + a.stream + ": " + s.message();
    Abandon(index);
    return Step::kFailed;
  }
  if (!done) {
    if (now_ns <= a.deadline_ns) return Step::kPending;
    *detail = "RDMA setup over " + a.stream + " did not complete within " + std::to_string(setup_ns_ / 1'000'000) +
              " ms";
    Abandon(index);
    return Step::kFailed;
  }
  std::unique_ptr<Path> path = a.setup->TakePath(a.socket.release());  // the stream tells of the peer's exit
  *detail = path->Describe() + ", set up over " + a.stream;
  *out = std::move(path);
  Abandon(index);
  return Step::kDone;
}

VerbsReconnectInbox::VerbsReconnectInbox(uint64_t conn_id, const ConnectionKey& key, int path_count,
                                         std::vector<sockaddr_storage> peers, tcp::PathSocketOptions socket_options,
                                         std::vector<VerbsPathRecipe> paths, uint64_t setup_ns)
    : hub_(conn_id, key, path_count, std::move(peers), socket_options), paths_(std::move(paths)), setup_ns_(setup_ns) {}

void VerbsReconnectInbox::Poll(uint64_t now_ns) {
  hub_.Poll(now_ns);
  std::vector<RejoinMailbox::Arrival> admitted;
  if (hub_.TakeSockets(&admitted)) {
    for (auto& a : admitted) {
      if (a.path < 0 || static_cast<size_t>(a.path) >= paths_.size() || paths_[static_cast<size_t>(a.path)].dev == nullptr)
        continue;  // the hub checked the index against the connection's path count
      // A newer rejoin of the same path supersedes one still in setup (the sender abandoned that one).
      std::erase_if(setups_, [&](const Setup& s) { return s.index == a.path; });
      Setup s;
      s.index = a.path;
      s.socket = std::move(a.socket);
      s.peer = std::move(a.peer);
      s.deadline_ns = now_ns + setup_ns_;
      const VerbsPathRecipe& recipe = paths_[static_cast<size_t>(a.path)];
      Status st = VerbsPathSetup::Create(VerbsPathSetup::Role::kAcceptor, a.path, *recipe.dev, recipe.options, &s.setup);
      if (!st.ok()) {
        FF_WARN("refused a rejoin of path %d from %s: cannot create its queue pair on %s:%d: %s", a.path,
                s.peer.c_str(), recipe.dev->name.c_str(), static_cast<int>(recipe.dev->port), st.message().c_str());
        continue;
      }
      setups_.push_back(std::move(s));
    }
  }
  // An exchange waits on the peer's round trips: reading its stream on every progress call would be
  // a system call per call for nothing.
  if (setups_.empty() || now_ns < next_step_ns_) return;
  next_step_ns_ = now_ns + kStepIntervalNs;
  for (auto it = setups_.begin(); it != setups_.end();) {
    bool done = false;
    Status st = it->setup->Step(it->socket.fd(), &done);
    if (!st.ok() || (!done && now_ns > it->deadline_ns)) {
      FF_WARN("rejoin of path %d from %s failed: %s", it->index, it->peer.c_str(),
              st.ok() ? "its RDMA setup did not complete in time" : st.message().c_str());
      it = setups_.erase(it);
      continue;
    }
    if (!done) {
      ++it;
      continue;
    }
    Arrival arr;
    arr.index = it->index;
    arr.peer = it->peer;
    arr.path = it->setup->TakePath(it->socket.release());  // the stream tells of the peer's exit
    ready_.push_back(std::move(arr));
    it = setups_.erase(it);
  }
}

bool VerbsReconnectInbox::Take(std::vector<Arrival>* out) {
  if (ready_.empty()) return false;
  for (auto& a : ready_) out->push_back(std::move(a));
  ready_.clear();
  return true;
}

}  // namespace ff
