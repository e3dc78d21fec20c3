// RdmaPath: posting frames as SEND / RDMA WRITE WITH IMMEDIATE, reaping completions, fencing a QP.
#include "verbs/rdma_path.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/logging.h"
#include "verbs/rdma_sysfs.h"

namespace ff::verbs {
namespace {

// The header SEND of a data chunk is unsignaled; it only completes (in error) when the QP fails.
constexpr uint64_t kHeaderWrId = UINT64_MAX;
constexpr int kPollBatch = 16;

uint64_t MonoNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

bool IsData(const FrameHeader& h) { return h.type == static_cast<uint8_t>(FrameType::kData); }

// The errno a failed completion stands for, so PendingError reads like a socket's SO_ERROR.
int ErrnoForStatus(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return ETIMEDOUT;  // the peer stopped acknowledging: the link or the peer is gone
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_MW_BIND_ERR:
      return EACCES;  // a key or address that the registration does not cover
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_REM_OP_ERR:
      return EPROTO;
    default:
      return EIO;
  }
}

std::string GidText(const std::array<uint8_t, 16>& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(g.data(), kMapped, sizeof(kMapped)) == 0) {
    inet_ntop(AF_INET, g.data() + 12, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, g.data(), buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

Status OpenRdmaDevice(const IbverbsLoader& ib, const std::string& name, int port, int gid_index,
                      std::unique_ptr<RdmaDevice>* out) {
  if (port < 1 || port > 255 || gid_index < 0 || gid_index > 255)
    return InvalidArgument("device " + name + ": port " + std::to_string(port) + " / GID index " +
                           std::to_string(gid_index) + " out of range");
  DeviceListOwner list;
  int n = 0;
  Status s = GetDeviceList(ib, &list, &n);
  if (!s.ok()) return s;
  ibv_device* found = nullptr;
  for (int i = 0; i < n; ++i)
    if (name == ib.api().get_device_name(list.get()[i])) found = list.get()[i];
  if (found == nullptr) return InvalidArgument("no verbs device named " + name);
  auto dev = std::make_unique<RdmaDevice>();
  dev->ib = &ib;
  dev->name = name;
  dev->port = static_cast<uint8_t>(port);
  dev->gid_index = static_cast<uint8_t>(gid_index);
  s = OpenDevice(ib, found, &dev->context);
  if (!s.ok()) return s;
  ibv_port_attr pa{};
  if (int rc = ib.QueryPort(dev->context.get(), dev->port, &pa); rc != 0)
    return SystemError(ErrnoMessage("ibv_query_port(" + name + ":" + std::to_string(port) + ")", rc > 0 ? rc : errno));
  if (pa.state != IBV_PORT_ACTIVE)
    FF_WARN("verbs: %s port %d is not ACTIVE (state %d); connections on it will not come up", name.c_str(), port,
            static_cast<int>(pa.state));
  dev->lid = pa.lid;
  dev->active_mtu = pa.active_mtu;
  if (int rc = ib.api().query_gid(dev->context.get(), dev->port, gid_index, &dev->gid); rc != 0)
    return SystemError(ErrnoMessage("ibv_query_gid(" + name + " GID " + std::to_string(gid_index) + ")",
                                    rc > 0 ? rc : errno));
  dev->events = std::make_unique<AsyncEvents>(ib, dev->context.get(), name);
  if (Status es = dev->events->Init(); !es.ok()) {
    FF_WARN("verbs: %s: %s; a port or QP failure shows only through completions, carrier and the watchdog",
            name.c_str(), es.message().c_str());
    dev->events.reset();
  }
  s = AllocPd(ib, dev->context.get(), &dev->pd);
  if (!s.ok()) return s;
  // Remote write: the receiver's posted buffers come from this cache and the peer writes into them.
  dev->mrs = std::make_unique<MrCache>(
      VerbsRegistrar(ib, dev->pd.get(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (auto nd = ReadSysfsLine(IbPortDir("/", name, port) + "/gid_attrs/ndevs/" + std::to_string(gid_index)))
    dev->netdev = *nd;
  *out = std::move(dev);
  return Status::Ok();
}

RdmaPath::RdmaPath(int index, RdmaDevice& dev, const RdmaPathOptions& options)
    : Path(index), dev_(dev), api_(dev.ib->api()), options_(options) {}

void RdmaPath::WatchPeer(int fd) {
  if (peer_fd_ >= 0) ::close(peer_fd_);
  peer_fd_ = fd;
  peer_watch_off_ = false;
  peer_checked_ns_ = MonoNs();
  if (fd < 0) return;
  // The stream only has to tell of the peer process's exit, which its kernel reports with a FIN (or
  // a reset) whatever our keepalive. Keepalive with TCP_USER_TIMEOUT would instead abort the idle
  // stream during an outage of the interface it rides - often the failed port's own, while this QP
  // runs on another - and the abort's reset, arriving once the link is back, reads at the peer as
  // this process having exited: a healthy path failed on both ends.
  const int zero = 0;
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &zero, sizeof(zero));
  const unsigned int no_timeout = 0;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &no_timeout, sizeof(no_timeout));
}

RdmaPath::~RdmaPath() {
  if (peer_fd_ >= 0) ::close(peer_fd_);
  if (qp_ && dev_.events) dev_.events->ForgetQp(qp_->qp_num);
  // The QP goes first, so no work request can still read a payload whose registration we drop next.
  qp_.reset();
  for (int i = 0; i < tx_posted_; ++i) {
    TxFrame& f = tx_[(tx_head_ + i) % kTxRing];
    if (f.mr.id != 0) (void)dev_.mrs->Release(f.mr);
  }
}

Status RdmaPath::Create(int index, RdmaDevice& dev, const RdmaPathOptions& options, std::unique_ptr<RdmaPath>* out) {
  if (options.key_slot < 0 || options.key_slot >= 4)
    return InvalidArgument("RdmaPath: key slot " + std::to_string(options.key_slot) + " is not in 0..3");
  std::unique_ptr<RdmaPath> p(new RdmaPath(index, dev, options));
  Status s = p->Init();
  if (!s.ok()) return s;
  *out = std::move(p);
  return Status::Ok();
}

Status RdmaPath::Init() {
  const IbverbsLoader& ib = *dev_.ib;
  const size_t tx_bytes = size_t{kTxRing} * kSlotBytes;
  const size_t rx_bytes = size_t{kRxRing} * kSlotBytes;
  tx_store_.reset(new char[tx_bytes]());
  rx_store_.reset(new char[rx_bytes]());
  Status s = RegMr(ib, dev_.pd.get(), tx_store_.get(), tx_bytes, IBV_ACCESS_LOCAL_WRITE, &tx_mr_);
  if (s.ok()) s = RegMr(ib, dev_.pd.get(), rx_store_.get(), rx_bytes, IBV_ACCESS_LOCAL_WRITE, &rx_mr_);
  // Each frame takes at most two send work requests and one completion.
  if (s.ok()) s = CreateCq(ib, dev_.context.get(), 2 * kTxRing + 4, nullptr, 0, &send_cq_);
  if (s.ok()) s = CreateCq(ib, dev_.context.get(), kRxRing + 4, nullptr, 0, &recv_cq_);
  if (!s.ok()) return s;
  ibv_qp_init_attr ia{};
  ia.send_cq = send_cq_.get();
  ia.recv_cq = recv_cq_.get();
  ia.qp_type = IBV_QPT_RC;
  ia.sq_sig_all = 0;
  ia.cap.max_send_wr = 2 * kTxRing + 2;
  ia.cap.max_recv_wr = kRxRing;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  s = CreateQp(ib, dev_.pd.get(), &ia, &qp_);
  if (!s.ok()) return s;

  std::random_device rd;
  local_psn_ = rd() & 0xffffffu;
  options_.qp.port = dev_.port;
  options_.qp.gid_index = dev_.gid_index;
  QpTransition init = BuildInit(options_.qp);
  if (int rc = api_.modify_qp(qp_.get(), &init.attr, init.mask); rc != 0)
    return SystemError(ErrnoMessage("ibv_modify_qp(" + dev_.name + " QP " + std::to_string(qp_->qp_num) + " INIT)",
                                    rc > 0 ? rc : errno));
  // Receives may be posted from INIT on: the peer's first SEND must find one.
  for (uint32_t i = 0; i < static_cast<uint32_t>(kRxRing); ++i)
    if (!PostRecv(i)) return SystemError(ErrnoMessage("ibv_post_recv(" + dev_.name + ")", last_errno_));
  describe_ = dev_.name + ":" + std::to_string(dev_.port) + " qp " + std::to_string(qp_->qp_num) + " (unconnected)";
  return Status::Ok();
}

uint32_t RdmaPath::qpn() const { return qp_ ? qp_->qp_num : 0; }

RdmaEndpoint RdmaPath::local() const {
  RdmaEndpoint e;
  e.qpn = qpn();
  e.psn = local_psn_;
  e.lid = dev_.lid;
  e.mtu = static_cast<uint8_t>(dev_.active_mtu);
  e.key_slot = static_cast<uint8_t>(options_.key_slot);
  std::memcpy(e.gid.data(), dev_.gid.raw, e.gid.size());
  return e;
}

Status RdmaPath::Connect(const RdmaEndpoint& remote) {
  if (remote.key_slot != 0xff) {
    if (remote.key_slot >= 4) return InvalidArgument("peer endpoint names key slot " + std::to_string(remote.key_slot) + "; accepted 0 to 3");
    options_.key_slot = remote.key_slot;
  }
  RcQpParams p = options_.qp;
  p.remote_gid = remote.gid;
  p.remote_lid = remote.lid;
  p.remote_qpn = remote.qpn;
  p.remote_psn = remote.psn;
  p.local_psn = local_psn_;
  p.port_active_mtu = std::min(dev_.active_mtu, static_cast<ibv_mtu>(remote.mtu));
  Status s = ValidateRcQpParams(p);
  if (!s.ok()) return s;
  const std::string where = dev_.name + " QP " + std::to_string(qpn());
  QpTransition rtr = BuildRtr(p);
  if (int rc = api_.modify_qp(qp_.get(), &rtr.attr, rtr.mask); rc != 0)
    return SystemError(ErrnoMessage("ibv_modify_qp(" + where + " RTR)", rc > 0 ? rc : errno));
  QpTransition rts = BuildRts(p);
  if (int rc = api_.modify_qp(qp_.get(), &rts.attr, rts.mask); rc != 0)
    return SystemError(ErrnoMessage("ibv_modify_qp(" + where + " RTS)", rc > 0 ? rc : errno));
  connected_ = true;
  describe_ = dev_.name + ":" + std::to_string(dev_.port) + " qp " + std::to_string(qpn()) + "->" +
              GidText(remote.gid) + " qp " + std::to_string(remote.qpn);
  return Status::Ok();
}

bool RdmaPath::PostRecv(uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(rx_store_.get() + size_t{slot} * kSlotBytes);
  sge.length = kSlotBytes;
  sge.lkey = rx_mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qp_.get(), &wr, &bad);
  if (rc != 0) {
    last_errno_ = rc > 0 ? rc : EIO;
    return false;
  }
  return true;
}

void RdmaPath::Queue(const FrameHeader& sealed, const char* payload) {
  if (IsData(sealed)) {
    // No destination: Flush refuses it (a data chunk over RDMA must come through QueueData).
    QueueData(sealed, payload, RecvDescriptor{}, nullptr);
    return;
  }
  const int slot = (tx_head_ + tx_count_) % kTxRing;
  char* buf = tx_store_.get() + size_t(slot) * kSlotBytes;
  const uint32_t len = std::min<uint32_t>(sealed.length, kMaxControlPayload);
  std::memcpy(buf, &sealed, sizeof(FrameHeader));
  if (len > 0) std::memcpy(buf + sizeof(FrameHeader), payload, len);
  tx_[slot] = TxFrame{sealed, buf + sizeof(FrameHeader), 0, 0, MrRef{},
                      static_cast<uint32_t>(sizeof(FrameHeader)) + len, false, 0};
  ++tx_count_;
}

void RdmaPath::QueueData(const FrameHeader& sealed, const char* payload, const RecvDescriptor& dest,
                         const MemHandle* mem) {
  if (!IsData(sealed)) {
    Queue(sealed, payload);
    return;
  }
  const int slot = (tx_head_ + tx_count_) % kTxRing;
  std::memcpy(tx_store_.get() + size_t(slot) * kSlotBytes, &sealed, sizeof(FrameHeader));
  const uint64_t raddr = dest.addr == 0 ? 0 : dest.addr + sealed.offset;
  const MemKey* key = mem != nullptr && mem->Covers(payload, sealed.length) ? mem->For(dev_.mrs.get()) : nullptr;
  tx_[slot] = TxFrame{sealed, payload, raddr, dest.keys[options_.key_slot], MrRef{},
                      static_cast<uint32_t>(sizeof(FrameHeader)) + sealed.length, key != nullptr,
                      key != nullptr ? key->lkey : 0};
  ++tx_count_;
  ++queued_data_frames_;
  queued_payload_bytes_ += sealed.length;
}

void RdmaPath::DropQueued() {
  // Only frames not yet posted: posted ones belong to the QP until their completion (or Fence).
  tx_count_ = tx_posted_;
  queued_data_frames_ = 0;
  queued_payload_bytes_ = 0;
}

bool RdmaPath::PostFrame(int slot) {
  TxFrame& f = tx_[slot];
  char* buf = tx_store_.get() + size_t(slot) * kSlotBytes;
  const bool data = IsData(f.hdr);
  ibv_sge hs{};
  hs.addr = reinterpret_cast<uintptr_t>(buf);
  hs.length = data ? static_cast<uint32_t>(sizeof(FrameHeader)) : f.wr_bytes;
  hs.lkey = tx_mr_->lkey;
  ibv_send_wr wr[2] = {};
  wr[0].sg_list = &hs;
  wr[0].num_sge = 1;
  wr[0].opcode = IBV_WR_SEND;
  ibv_sge ps{};
  if (data) {
    if (f.raddr == 0 && f.hdr.length > 0) {  // a zero-length write touches no remote memory
      last_errno_ = EINVAL;
      rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): data chunk of message " +
                  std::to_string(f.hdr.seq) + " has no remote buffer (an RDMA path needs the receiver's descriptor)";
      return false;
    }
    if (f.hdr.length > 0 && f.has_lkey) {
      // NCCL's handle named this device's registration: no lookup, no reference (NCCL keeps the
      // buffer registered until the send completed).
      ps.addr = reinterpret_cast<uintptr_t>(f.payload);
      ps.length = f.hdr.length;
      ps.lkey = f.lkey;
    } else if (f.hdr.length > 0) {
      Status s = dev_.mrs->Acquire(f.payload, f.hdr.length, &f.mr);
      if (!s.ok()) {
        last_errno_ = EFAULT;
        rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): " + s.message();
        return false;
      }
      ps.addr = reinterpret_cast<uintptr_t>(f.payload);
      ps.length = f.hdr.length;
      ps.lkey = f.mr.handle.lkey;
    }
    wr[0].wr_id = kHeaderWrId;
    wr[0].next = &wr[1];
    wr[1].wr_id = static_cast<uint64_t>(slot);
    wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr[1].send_flags = IBV_SEND_SIGNALED;
    wr[1].imm_data = htonl(tx_imm_);
    wr[1].sg_list = f.hdr.length > 0 ? &ps : nullptr;
    wr[1].num_sge = f.hdr.length > 0 ? 1 : 0;
    wr[1].wr.rdma.remote_addr = f.raddr;
    wr[1].wr.rdma.rkey = f.rkey;
  } else {
    wr[0].wr_id = static_cast<uint64_t>(slot);
    wr[0].send_flags = IBV_SEND_SIGNALED;
  }
  ibv_send_wr* bad = nullptr;
  // The send queue holds 2 work requests per ring slot, so a post can fail only on a broken QP.
  const int rc = ibv_post_send(qp_.get(), wr, &bad);
  if (rc != 0) {
    if (f.mr.id != 0) (void)dev_.mrs->Release(f.mr);
    f.mr = MrRef{};
    last_errno_ = rc > 0 ? rc : EIO;
    rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): ibv_post_send failed: " +
                std::strerror(last_errno_);
    return false;
  }
  if (data) ++tx_imm_;
  wrs_posted_ += data ? 2 : 1;
  return true;
}

bool RdmaPath::Flush() {
  if (fenced_) {
    DropQueued();
    last_errno_ = ENOTCONN;
    return false;
  }
  ReapSends();
  if (pending_errno_ != 0) {
    last_errno_ = pending_errno_;
    return false;
  }
  if (!connected_) return true;  // kept until Connect
  while (tx_posted_ < tx_count_) {
    const int slot = (tx_head_ + tx_posted_) % kTxRing;
    if (!PostFrame(slot)) return false;
    TxFrame& f = tx_[slot];
    if (inflight_bytes_ == 0) last_progress_ns_ = MonoNs();
    inflight_bytes_ += f.wr_bytes;
    inflight_wrs_ += IsData(f.hdr) ? 2 : 1;
    ++tx_posted_;
    if (IsData(f.hdr)) {
      --queued_data_frames_;
      queued_payload_bytes_ -= f.hdr.length;
    }
  }
  return true;
}

void RdmaPath::NoteSendError(const ibv_wc& wc) {
  // Flushed work requests after our own Fence are expected, not a fault of the path.
  if (fenced_ && wc.status == IBV_WC_WR_FLUSH_ERR) return;
  if (pending_errno_ != 0) return;  // the first error is the cause; the rest are its flushes
  pending_errno_ = ErrnoForStatus(wc.status);
  char buf[96];
  std::snprintf(buf, sizeof(buf), " (vendor error 0x%x)", wc.vendor_err);
  rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): send completion failed: " +
              api_.wc_status_str(wc.status) + buf;
}

void RdmaPath::CompleteHead(bool ok) {
  if (tx_posted_ == 0) return;
  TxFrame& f = tx_[tx_head_];
  if (f.mr.id != 0) {
    (void)dev_.mrs->Release(f.mr);
    f.mr = MrRef{};
  }
  if (ok && IsData(f.hdr)) bytes_acked_ += f.hdr.length;
  inflight_bytes_ -= f.wr_bytes;
  inflight_wrs_ -= IsData(f.hdr) ? 2 : 1;
  tx_head_ = (tx_head_ + 1) % kTxRing;
  --tx_count_;
  --tx_posted_;
}

void RdmaPath::ReapSends() {
  if (tx_posted_ == 0 || !send_cq_) return;
  ibv_wc wc[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(send_cq_.get(), kPollBatch, wc);
    if (n <= 0) {
      if (n < 0 && pending_errno_ == 0) {
        pending_errno_ = EIO;
        rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): ibv_poll_cq failed on the send queue";
      }
      return;
    }
    last_progress_ns_ = MonoNs();
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) NoteSendError(wc[i]);
      // Each frame has exactly one completion that ends it (its signaled request); a data header's
      // own completion shows up only when the QP failed, and ends nothing.
      if (wc[i].wr_id == kHeaderWrId) continue;
      CompleteHead(wc[i].status == IBV_WC_SUCCESS);
    }
    if (n < kPollBatch) return;
  }
}

PumpResult RdmaPath::Deliver(FrameSink& sink, const RxDone& d, bool* consumed) {
  *consumed = false;
  auto bad = [&](const std::string& why) {
    rx_error_ = "bad frame on path " + std::to_string(index()) + " (" + describe_ + "): " + why;
    return PumpResult::kBadFrame;
  };
  if (!d.with_imm) {
    const char* slot = rx_store_.get() + size_t{d.slot} * kSlotBytes;
    if (d.byte_len < sizeof(FrameHeader)) return bad("a receive of " + std::to_string(d.byte_len) + " bytes");
    FrameHeader h;
    std::memcpy(&h, slot, sizeof(h));
    std::string why = ValidateHeader(h);
    if (!why.empty()) return bad(why);
    const bool data = IsData(h);
    const uint32_t expect = static_cast<uint32_t>(sizeof(FrameHeader)) + (data ? 0 : h.length);
    if (d.byte_len != expect)
      return bad("frame of type " + std::to_string(h.type) + " came in " + std::to_string(d.byte_len) +
                 " bytes, its header says " + std::to_string(expect));
    if (data) {
      if (rx_have_header_) return bad("a second data header before the first one's payload");
      rx_hdr_ = h;
      rx_have_header_ = true;
      *consumed = true;
      if (!PostRecv(d.slot)) return PumpResult::kIoError;
      return PumpResult::kIdle;
    }
    char* dest = nullptr;
    const HeaderVerdict v = sink.OnHeader(*this, h, &dest);
    if (v == HeaderVerdict::kStall) return PumpResult::kStalled;
    if (v == HeaderVerdict::kReject) return PumpResult::kRejected;
    if (dest != nullptr && h.length > 0) std::memcpy(dest, slot + sizeof(FrameHeader), h.length);
    *consumed = true;
    sink.OnFrameComplete(*this, h);
    if (!PostRecv(d.slot)) return PumpResult::kIoError;
    return PumpResult::kIdle;
  }
  if (!rx_have_header_) return bad("an RDMA write with immediate without its header");
  if (d.imm != rx_imm_)
    return bad("data chunk " + std::to_string(d.imm) + " arrived where " + std::to_string(rx_imm_) + " was due");
  if (d.byte_len != rx_hdr_.length)
    return bad("the write of message " + std::to_string(rx_hdr_.seq) + " carried " + std::to_string(d.byte_len) +
               " bytes, its header says " + std::to_string(rx_hdr_.length));
  // The payload already sits where the sender's descriptor pointed (the posted buffer + offset, which
  // is what the sink would name as dest), so there is nothing to copy.
  char* dest = nullptr;
  const HeaderVerdict v = sink.OnHeader(*this, rx_hdr_, &dest);
  if (v == HeaderVerdict::kStall) return PumpResult::kStalled;
  if (v == HeaderVerdict::kReject) return PumpResult::kRejected;
  *consumed = true;
  rx_have_header_ = false;
  ++rx_imm_;
  sink.OnFrameComplete(*this, rx_hdr_);
  if (!PostRecv(d.slot)) return PumpResult::kIoError;
  return PumpResult::kIdle;
}

bool RdmaPath::CheckDeviceEvents() {
  AsyncEvents* ev = dev_.events.get();
  if (ev == nullptr || !qp_) return false;
  const uint64_t gen = ev->PollIfDue(MonoNs());
  if (gen == events_seen_) return false;
  events_seen_ = gen;
  if (fenced_ || pending_errno_ != 0) return false;
  const AsyncEvents::Verdict v = ev->ForPath(dev_.port, qp_->qp_num);
  if (v.err == 0) return false;
  pending_errno_ = v.err;
  last_errno_ = v.err;
  event_failed_ = true;
  rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): " + v.why;
  // A port error leaves the QP in RTS (it only stops getting acknowledgements); were the port to come
  // back, its posted work requests would still be sent after their chunks went out on another path.
  // ERR flushes them now; Fence later only waits for the flushed completions.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = api_.modify_qp(qp_.get(), &a, IBV_QP_STATE); rc != 0)
    FF_WARN("verbs: path %d (%s): moving the QP to ERR after %s failed: %s", index(), describe_.c_str(),
            v.why.c_str(), std::strerror(rc > 0 ? rc : errno));
  DropQueued();
  return true;
}

PumpResult RdmaPath::Poll(FrameSink& sink) {
  ReapSends();
  if (fenced_) return PumpResult::kClosed;
  // A device event is a hard signal: the path fails now, not at the watchdog's next look.
  if (CheckDeviceEvents() || event_failed_) return PumpResult::kIoError;
  if (peer_fd_ >= 0 && !peer_watch_off_ && !peer_exited_) {
    const uint64_t now = MonoNs();
    if (now - peer_checked_ns_ >= kPeerWatchNs) {
      peer_checked_ns_ = now;
      char byte;
      const ssize_t r = ::recv(peer_fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      const int err = r < 0 ? errno : 0;
      if (r == 0 || err == ECONNRESET || err == EPIPE) {
        last_errno_ = r == 0 ? ECONNRESET : err;
        rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): the peer closed the connection's " +
                    "bootstrap stream (its process exited)";
        // What it sent before it exited is delivered first (its last acknowledgement, typically):
        // the path reports the exit once its receive queue is empty.
        peer_exited_ = true;
      }
      if (r < 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
        // The stream's own network failed (an unreachable route gives EHOSTUNREACH), not the peer
        // process: the stream may ride the very interface whose port failed while this QP runs on
        // another one. The QP carries on; only the peer-exit watch ends. The socket stays open until
        // the path goes: closing it now would send the live peer a FIN, which it would read as this
        // process having exited.
        FF_INFO(NCCL_NET, "verbs: path %d (%s): bootstrap stream failed (%s); no longer watching it for the peer's exit",
                index(), describe_.c_str(), std::strerror(err));
        peer_watch_off_ = true;
      }
    }
  }
  ibv_wc wc[kPollBatch];
  for (;;) {
    while (rx_backlog_count_ > 0) {
      bool consumed = false;
      const PumpResult r = Deliver(sink, rx_backlog_[rx_backlog_head_], &consumed);
      if (consumed) {
        rx_backlog_head_ = (rx_backlog_head_ + 1) % kRxRing;
        --rx_backlog_count_;
      }
      if (r != PumpResult::kIdle) return r;
    }
    const int n = ibv_poll_cq(recv_cq_.get(), kPollBatch, wc);
    if (n == 0) return peer_exited_ ? PumpResult::kClosed : PumpResult::kIdle;
    if (n < 0) {
      last_errno_ = EIO;
      rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): ibv_poll_cq failed on the receive queue";
      return PumpResult::kIoError;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        last_errno_ = ErrnoForStatus(wc[i].status);
        // A send-side failure flushes the receives too: keep the first cause, not its echo.
        if (pending_errno_ == 0) {
          pending_errno_ = last_errno_;
          rx_error_ = "path " + std::to_string(index()) + " (" + describe_ + "): receive completion failed: " +
                      api_.wc_status_str(wc[i].status);
        }
        return PumpResult::kIoError;
      }
      // Never more than kRxRing: a slot is posted again only once its completion left the backlog.
      RxDone& d = rx_backlog_[(rx_backlog_head_ + rx_backlog_count_) % kRxRing];
      d.slot = static_cast<uint32_t>(wc[i].wr_id);
      d.byte_len = wc[i].byte_len;
      d.with_imm = wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM;
      d.imm = d.with_imm ? ntohl(wc[i].imm_data) : 0;
      ++rx_backlog_count_;
    }
  }
}

void RdmaPath::Fence() {
  DropQueued();
  if (!qp_) return;
  // Whatever the device said meanwhile is read (and logged) now, even when the carrier or the
  // watchdog was first: the event is part of the record, and this path polls no more.
  if (dev_.events) dev_.events->PollNow();
  if (!fenced_) {
    fenced_ = true;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    if (int rc = api_.modify_qp(qp_.get(), &a, IBV_QP_STATE); rc != 0)
      FF_WARN("verbs: path %d (%s): moving the QP to ERR failed: %s", index(), describe_.c_str(),
              std::strerror(rc > 0 ? rc : errno));
  }
  // In ERR the device completes every posted work request with a flush status; once all of ours are
  // back, none of them can still be read from or transmitted.
  const uint64_t deadline = MonoNs() + 2'000'000'000ull;
  while (tx_posted_ > 0 && MonoNs() < deadline) ReapSends();
  if (tx_posted_ > 0) {
    FF_WARN("verbs: path %d (%s): %d work request(s) not flushed 2 s after the fence; releasing them anyway",
            index(), describe_.c_str(), tx_posted_);
    while (tx_posted_ > 0) CompleteHead(false);
  }
  // The receives flush too; they carry nothing we still want.
  ibv_wc wc[kPollBatch];
  while (ibv_poll_cq(recv_cq_.get(), kPollBatch, wc) > 0) {
  }
  rx_backlog_count_ = 0;
  rx_have_header_ = false;
}

PathSample RdmaPath::Sample() const {
  PathSample s;
  s.valid = connected_ && !fenced_;
  // Work requests, not frames: a data chunk is two (its header's SEND and the WRITE). The watchdog
  // judges a path only with two or more units outstanding (one TCP segment may wait for a delayed
  // ACK); an RC QP acknowledges at once, so one chunk in flight is already judged.
  s.unacked_segments = inflight_wrs_;
  s.bytes_acked = bytes_acked_;
  s.ms_since_ack = tx_posted_ > 0 ? static_cast<uint32_t>((MonoNs() - last_progress_ns_) / 1'000'000) : 0;
  s.segs_out = wrs_posted_;
  // The local ACK timeout the QP retries on: 4.096 us * 2^timeout.
  s.rto_us = static_cast<uint32_t>(4.096 * static_cast<double>(1ull << std::min<int>(options_.qp.timeout, 31)));
  return s;
}

int RdmaPath::LocalIfindex() const {
  if (ifindex_ >= 0) return ifindex_;
  ifindex_ = dev_.netdev.empty() ? 0 : static_cast<int>(if_nametoindex(dev_.netdev.c_str()));
  return ifindex_;
}

std::string RdmaPath::DebugState() const {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "path %d %s%s%s %s queued=%d posted=%d inflight=%llu acked=%llu wrs=%llu rx_backlog=%d "
                "rx_header=%s imm tx=%u rx=%u err=%d",
                index(), alive() ? "alive" : "dead", draining() ? " draining" : "", fenced_ ? " fenced" : "",
                describe_.c_str(), queued_frames(), tx_posted_, static_cast<unsigned long long>(inflight_bytes_),
                static_cast<unsigned long long>(bytes_acked_), static_cast<unsigned long long>(wrs_posted_),
                rx_backlog_count_, rx_have_header_ ? "pending" : "none", tx_imm_, rx_imm_, pending_errno_);
  return buf;
}

}  // namespace ff::verbs
