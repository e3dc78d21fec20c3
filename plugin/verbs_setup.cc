// The bootstrap exchange's steps: endpoint out, endpoint in (then RTR/RTS), the ready byte.
#include "plugin/verbs_setup.h"

#include <sys/socket.h>

#include <cerrno>

namespace ff {

verbs::QpKnobs QpKnobsFromConfig(const Config& cfg) {
  verbs::QpKnobs k;
  k.timeout = cfg.ib_timeout;
  k.retry_cnt = cfg.ib_retry_cnt;
  k.sl = cfg.ib_sl;
  k.traffic_class = cfg.ib_tc;
  k.mtu_cap = static_cast<ibv_mtu>(cfg.ib_mtu);
  return k;
}

void ApplyQpConfig(const Config& cfg, int policy_tc, int policy_sl, verbs::RcQpParams* qp) {
  verbs::ApplyQpKnobs(QpKnobsFromConfig(cfg), policy_tc, policy_sl, qp);
}

Status VerbsPathSetup::Create(Role role, int index, verbs::RdmaDevice& dev, const verbs::RdmaPathOptions& options,
                              std::unique_ptr<VerbsPathSetup>* out) {
  std::unique_ptr<VerbsPathSetup> s(new VerbsPathSetup(role));
  Status st = verbs::RdmaPath::Create(index, dev, options, &s->path_);
  if (!st.ok()) return st;
  s->local_ = s->path_->local();
  // The acceptor reads the connector's endpoint first; the connector sends its own first.
  s->stage_ = role == Role::kConnector ? Stage::kSendLocal : Stage::kReadRemote;
  *out = std::move(s);
  return Status::Ok();
}

Status VerbsPathSetup::Pump(int fd, bool write, char* buf, uint32_t size, bool* complete) {
  *complete = false;
  while (moved_ < size) {
    const ssize_t n = write ? ::send(fd, buf + moved_, size - moved_, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : ::recv(fd, buf + moved_, size - moved_, MSG_DONTWAIT);
    if (n > 0) {
      moved_ += static_cast<uint32_t>(n);
      continue;
    }
    if (n == 0 && !write)
      return RemoteError("the peer closed the bootstrap connection during the RDMA endpoint exchange");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    return RemoteError(ErrnoMessage(write ? "sending on the RDMA bootstrap connection"
                                          : "reading the RDMA bootstrap connection",
                                    errno));
  }
  moved_ = 0;
  *complete = true;
  return Status::Ok();
}

Status VerbsPathSetup::Step(int fd, bool* done) {
  *done = false;
  for (;;) {
    bool complete = false;
    Status s;
    switch (stage_) {
      case Stage::kSendLocal:
        s = Pump(fd, true, reinterpret_cast<char*>(&local_), sizeof(local_), &complete);
        if (!s.ok() || !complete) return s;
        stage_ = role_ == Role::kConnector ? Stage::kReadRemote : Stage::kReadReady;
        break;
      case Stage::kReadRemote:
        s = Pump(fd, false, reinterpret_cast<char*>(&remote_), sizeof(remote_), &complete);
        if (!s.ok() || !complete) return s;
        s = path_->Connect(remote_);
        if (!s.ok()) return s;
        stage_ = role_ == Role::kConnector ? Stage::kSendReady : Stage::kSendLocal;
        break;
      case Stage::kSendReady:
        s = Pump(fd, true, &ready_, 1, &complete);
        if (!s.ok() || !complete) return s;
        stage_ = Stage::kDone;
        break;
      case Stage::kReadReady:
        s = Pump(fd, false, &ready_, 1, &complete);
        if (!s.ok() || !complete) return s;
        if (ready_ != 'R') return RemoteError("the peer's RDMA bootstrap sent a bad ready byte");
        stage_ = Stage::kDone;
        break;
      case Stage::kDone:
        *done = true;
        return Status::Ok();
    }
  }
}

}  // namespace ff
