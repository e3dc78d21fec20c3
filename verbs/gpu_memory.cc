// GPU memory over verbs: capability probes and the loopback flush queue pair (see gpu_memory.h).
#include "verbs/gpu_memory.h"

#include <cerrno>
#include <cstring>
#include <random>

#include "base/logging.h"
#include "pcie/gpu_direct.h"
#include "verbs/qp_attrs.h"
#include "verbs/rdma_path.h"

namespace ff::verbs {

bool DmabufSupported(const IbverbsLoader& ib, ibv_pd* pd) {
  if (!ib.available() || pd == nullptr || ib.api().reg_dmabuf_mr == nullptr) return false;
  errno = 0;
  ibv_mr* mr = ib.api().reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  if (mr != nullptr) {
    MrOwner owner(mr, {&ib.api()});
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

bool PeerMemLoaded(const std::string& sysfs_root) {
  std::string root = sysfs_root.empty() ? "/" : sysfs_root;
  if (root.back() != '/') root += '/';
  return !pcie::PeerMemModule(root + "sys").empty();
}

FlushQp::FlushQp(RdmaDevice& dev) : dev_(dev) {}

FlushQp::~FlushQp() {
  // The QP first: nothing may still write the scratch when its registration goes.
  qp_.reset();
  scratch_mr_.reset();
}

uint32_t FlushQp::qpn() const { return qp_ ? qp_->qp_num : 0; }

Status FlushQp::Create(RdmaDevice& dev, std::unique_ptr<FlushQp>* out) {
  std::unique_ptr<FlushQp> f(new FlushQp(dev));
  Status s = f->Init();
  if (!s.ok()) return Status(s.code(), "flush queue pair on " + dev.name + ": " + s.message());
  *out = std::move(f);
  return Status::Ok();
}

Status FlushQp::Init() {
  const IbverbsLoader& ib = *dev_.ib;
  scratch_.reset(new uint64_t(0));
  Status s = RegMr(ib, dev_.pd.get(), scratch_.get(), sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE, &scratch_mr_);
  if (s.ok()) s = CreateCq(ib, dev_.context.get(), kSlots + 2, nullptr, 0, &cq_);
  if (!s.ok()) return s;
  ibv_qp_init_attr ia{};
  ia.send_cq = cq_.get();
  ia.recv_cq = cq_.get();
  ia.qp_type = IBV_QPT_RC;
  ia.sq_sig_all = 1;
  ia.cap.max_send_wr = kSlots;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  s = CreateQp(ib, dev_.pd.get(), &ia, &qp_);
  if (!s.ok()) return s;

  RcQpParams p;
  p.port = dev_.port;
  p.gid_index = dev_.gid_index;
  p.port_active_mtu = dev_.active_mtu;
  std::memcpy(p.remote_gid.data(), dev_.gid.raw, p.remote_gid.size());
  p.remote_lid = dev_.lid;
  p.remote_qpn = qp_->qp_num;
  std::random_device rd;
  p.local_psn = p.remote_psn = rd() & 0xffffffu;
  // Reads only, each of 1 byte: a few may be outstanding at once.
  p.max_rd_atomic = 4;
  p.max_dest_rd_atomic = 4;
  s = ValidateRcQpParams(p);
  if (!s.ok()) return s;
  const std::string where = "QP " + std::to_string(qp_->qp_num);
  for (auto [t, name] : {std::pair{BuildInit(p), "INIT"}, std::pair{BuildRtr(p), "RTR"}, std::pair{BuildRts(p), "RTS"}}) {
    if (int rc = ib.api().modify_qp(qp_.get(), &t.attr, t.mask); rc != 0)
      return SystemError(ErrnoMessage("ibv_modify_qp(" + where + " " + name + ")", rc > 0 ? rc : errno));
  }
  FF_INFO(NCCL_NET, "verbs: flush queue pair %u on %s:%d (loopback RDMA READ after receives into GPU memory)",
          qp_->qp_num, dev_.name.c_str(), dev_.port);
  return Status::Ok();
}

bool FlushQp::Post(uint64_t addr, uint32_t rkey, int* slot, Status* error) {
  *slot = -1;
  int free_slot = -1;
  for (int i = 0; i < kSlots && free_slot < 0; ++i)
    if (state_[static_cast<size_t>(i)] == 0) free_slot = i;
  if (free_slot < 0) return false;
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(scratch_.get());
  sge.length = 1;
  sge.lkey = scratch_mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = static_cast<uint64_t>(free_slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
    *error = SystemError(ErrnoMessage("iflush: ibv_post_send(RDMA READ on " + dev_.name + " QP " +
                                          std::to_string(qpn()) + ")",
                                      rc > 0 ? rc : EIO));
    return false;
  }
  state_[static_cast<size_t>(free_slot)] = 1;
  ++busy_;
  *slot = free_slot;
  return true;
}

Status FlushQp::Reap() {
  ibv_wc wc[8];
  for (;;) {
    const int n = ibv_poll_cq(cq_.get(), 8, wc);
    if (n < 0) return SystemError("iflush: ibv_poll_cq failed on " + dev_.name);
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id >= static_cast<uint64_t>(kSlots)) continue;
      const size_t k = static_cast<size_t>(wc[i].wr_id);
      if (state_[k] != 1) continue;
      state_[k] = wc[i].status == IBV_WC_SUCCESS ? 2 : 3;
      status_[k] = wc[i].status;
    }
    if (n < 8) return Status::Ok();
  }
}

Status FlushQp::Test(int slot, bool* done) {
  *done = false;
  if (slot < 0 || slot >= kSlots || state_[static_cast<size_t>(slot)] == 0)
    return InvalidUsage("iflush: request tested after it completed, or never issued");
  const size_t k = static_cast<size_t>(slot);
  if (state_[k] == 1) {
    Status s = Reap();
    if (!s.ok()) return s;
  }
  if (state_[k] == 1) return Status::Ok();
  const bool failed = state_[k] == 3;
  state_[k] = 0;
  --busy_;
  *done = true;
  if (failed) {
    const char* why = dev_.ib->api().wc_status_str ? dev_.ib->api().wc_status_str(status_[k]) : "error";
    return SystemError("iflush: the flush read on " + dev_.name + " QP " + std::to_string(qpn()) + " failed: " + why +
                       " (status " + std::to_string(static_cast<int>(status_[k])) + ")");
  }
  return Status::Ok();
}

}  // namespace ff::verbs
