// VM test of RdmaPath on Soft-RoCE (run inside tests/vm): messages checked byte for byte, control frames
// both ways, 1 MiB write bandwidth, a completion error, and Fence. Exits 77 when the devices are absent.
//
// One thread drives both ends (sender on --dev-a, receiver on --dev-b): under TCG two busy-polling
// threads on 2 vCPUs starve the kernel's rxe work, and one loop keeps every step deterministic.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/wire_format.h"
#include "verbs/ibverbs_loader.h"
#include "verbs/rdma_bootstrap.h"
#include "verbs/rdma_path.h"

namespace {

using namespace ff;
using namespace ff::verbs;
using Clk = std::chrono::steady_clock;

struct Args {
  std::string dev_a = "rxe_a0";
  std::string dev_b = "rxe_b0";
  int gid_a = 1;
  int gid_b = 1;
  int messages = 24;
  int bw_iters = 64;
  uint64_t bw_size = 1 << 20;
  uint64_t chunk = 512 << 10;
  uint32_t seed = 12;
  int timeout_s = 60;
  std::string lossy_netdev;  // the sender's netdev, for the lossy fence test (tc netem); empty: skip it
};

constexpr uint64_t kMaxMsg = 4ull << 20;
constexpr uint64_t kGuard = 4096;  // bytes after the message that must stay untouched

[[noreturn]] void Fail(const std::string& m) {
  std::fprintf(stderr, "FAIL: %s\n", m.c_str());
  std::exit(1);
}
void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Fail(what + ": " + s.message());
}

FrameHeader ControlHeader(FrameType t, uint32_t len, int path) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(t);
  h.path = static_cast<uint16_t>(path);
  h.length = len;
  SealHeader(&h);
  return h;
}

// Sender's sink: descriptors from the receiver's kAck, and path events the receiver sends back.
struct SenderSink final : FrameSink {
  char ctl[kMaxControlPayload];
  std::vector<RecvDescriptor> descs;
  int acks = 0;
  int events = 0;
  HeaderVerdict OnHeader(Path&, const FrameHeader& h, char** dest) override {
    *dest = ctl;
    return h.type == static_cast<uint8_t>(FrameType::kData) ? HeaderVerdict::kReject : HeaderVerdict::kAccept;
  }
  void OnFrameComplete(Path&, const FrameHeader& h) override {
    if (h.type == static_cast<uint8_t>(FrameType::kPathEvent)) {
      ++events;
      return;
    }
    if (h.type != static_cast<uint8_t>(FrameType::kAck)) return;
    ++acks;
    AckMsg a;
    std::memcpy(&a, ctl, sizeof(a));
    for (uint32_t i = 0; i < a.descriptors; ++i) {
      RecvDescriptor d;
      std::memcpy(&d, ctl + sizeof(a) + i * sizeof(d), sizeof(d));
      descs.push_back(d);
    }
  }
};

// Receiver's sink: data chunks of messages [seq_lo, seq_hi) into `base`, and the sender's path events.
struct ReceiverSink final : FrameSink {
  char* base = nullptr;
  uint64_t capacity = 0;
  uint64_t seq_lo = 0, seq_hi = 0;
  uint64_t got_bytes = 0;
  int chunks = 0;
  int events = 0;
  std::string reason;
  char ctl[kMaxControlPayload];
  HeaderVerdict OnHeader(Path&, const FrameHeader& h, char** dest) override {
    if (h.type != static_cast<uint8_t>(FrameType::kData)) {
      *dest = ctl;
      return HeaderVerdict::kAccept;
    }
    if (h.seq < seq_lo || h.seq >= seq_hi || h.offset + h.length > capacity) {
      reason = "chunk seq " + std::to_string(h.seq) + " offset " + std::to_string(h.offset) + " len " +
               std::to_string(h.length) + " outside the posted receive";
      return HeaderVerdict::kReject;
    }
    *dest = base + h.offset;  // where the sender already wrote it
    return HeaderVerdict::kAccept;
  }
  void OnFrameComplete(Path&, const FrameHeader& h) override {
    if (h.type == static_cast<uint8_t>(FrameType::kData)) {
      got_bytes += h.length;
      ++chunks;
    } else if (h.type == static_cast<uint8_t>(FrameType::kPathEvent)) {
      ++events;
    }
  }
};

struct Pair {
  std::unique_ptr<RdmaPath> a;  // sender
  std::unique_ptr<RdmaPath> b;  // receiver
};

Pair MakePair(RdmaDevice& da, RdmaDevice& db, int index) {
  Pair p;
  RdmaPathOptions opt;
  Check(RdmaPath::Create(index, da, opt, &p.a), "creating the sender's path");
  Check(RdmaPath::Create(index, db, opt, &p.b), "creating the receiver's path");
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) Fail("socketpair");
  // One thread holds both ends: send both endpoints before reading either.
  Check(SendEndpoint(sv[0], p.a->local(), 5000), "sender's endpoint");
  Check(SendEndpoint(sv[1], p.b->local(), 5000), "receiver's endpoint");
  RdmaEndpoint from_b, from_a;
  Check(RecvEndpoint(sv[0], &from_b, 5000), "reading the receiver's endpoint");
  Check(RecvEndpoint(sv[1], &from_a, 5000), "reading the sender's endpoint");
  close(sv[0]);
  close(sv[1]);
  Check(p.a->Connect(from_b), "connecting the sender's QP");
  Check(p.b->Connect(from_a), "connecting the receiver's QP");
  std::printf("pair %d: %s | %s\n", index, p.a->Describe().c_str(), p.b->Describe().c_str());
  return p;
}

bool Broken(PumpResult r) {
  return r == PumpResult::kClosed || r == PumpResult::kIoError || r == PumpResult::kBadFrame ||
         r == PumpResult::kRejected;
}

void Pump(Pair& p, SenderSink& ss, ReceiverSink& rs) {
  if (!p.a->Flush()) Fail("sender flush: " + p.a->rx_error() + " errno " + std::to_string(p.a->last_errno()));
  if (!p.b->Flush()) Fail("receiver flush: " + p.b->rx_error());
  PumpResult r = p.a->Poll(ss);
  if (Broken(r)) Fail("sender poll: " + p.a->rx_error() + " / " + p.a->DebugState());
  r = p.b->Poll(rs);
  if (Broken(r)) Fail("receiver poll: " + p.b->rx_error() + rs.reason + " / " + p.b->DebugState());
}

template <typename Done>
void DriveUntil(Pair& p, SenderSink& ss, ReceiverSink& rs, Done done, const std::string& what, int timeout_s) {
  const auto deadline = Clk::now() + std::chrono::seconds(timeout_s);
  while (!done()) {
    if (Clk::now() > deadline)
      Fail("timed out waiting for " + what + ": " + p.a->DebugState() + " | " + p.b->DebugState());
    Pump(p, ss, rs);
  }
}

void Publish(RdmaPath& b, uint64_t seq, uint64_t capacity, const char* buf, uint32_t rkey) {
  char frame[sizeof(AckMsg) + sizeof(RecvDescriptor)];
  AckMsg a{};
  a.cum_done = seq;
  a.descriptors = 1;
  RecvDescriptor d{};
  d.seq = seq;
  d.capacity = capacity;
  d.tag = static_cast<int32_t>(seq);
  d.group_n = 1;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.keys[0] = rkey;
  std::memcpy(frame, &a, sizeof(a));
  std::memcpy(frame + sizeof(a), &d, sizeof(d));
  b.Queue(ControlHeader(FrameType::kAck, sizeof(frame), b.index()), frame);
}

void QueueMessage(RdmaPath& a, Pair& p, SenderSink& ss, ReceiverSink& rs, const RecvDescriptor& d, uint64_t seq,
                  const char* data, uint64_t size, uint64_t chunk, int timeout_s) {
  for (uint64_t off = 0; off < size || (size == 0 && off == 0); off += chunk) {
    DriveUntil(p, ss, rs, [&] { return a.CanQueue(); }, "room in the send ring", timeout_s);
    FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::kData);
    h.path = static_cast<uint16_t>(a.index());
    h.tag = static_cast<int32_t>(seq);
    h.length = static_cast<uint32_t>(std::min(chunk, size - off));
    h.seq = seq;
    h.offset = off;
    h.total = size;
    h.flags = kDataFlagAckNow;
    SealHeader(&h);
    a.QueueData(h, data + off, d, nullptr);
    if (size == 0) break;
  }
}

void Fill(char* p, uint64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<char>(x >> 56);
  }
}

double Seconds(Clk::time_point a, Clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void Sh(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) Fail("command failed: " + cmd);
}

void FenceTest(RdmaDevice& da, RdmaDevice& db, int index, const std::string& lossy, std::vector<char>& send_buf,
               std::vector<char>& recv_buf, const MrRef& recv_mr, const Args& args) {
  Pair p = MakePair(da, db, index);
  SenderSink ss;
  ReceiverSink rs;
  rs.base = recv_buf.data();
  rs.capacity = kMaxMsg;
  rs.seq_hi = 2;
  std::memset(recv_buf.data(), 0, recv_buf.size());
  std::memset(send_buf.data(), 0xAB, kMaxMsg);
  Publish(*p.b, 0, kMaxMsg, recv_buf.data(), recv_mr.handle.rkey);
  DriveUntil(p, ss, rs, [&] { return !ss.descs.empty(); }, "the fence descriptor", args.timeout_s);
  const RecvDescriptor d = ss.descs.back();
  if (!lossy.empty()) Sh("tc qdisc add dev " + lossy + " root netem loss 100%");
  const uint64_t chunk = 256 << 10;
  QueueMessage(*p.a, p, ss, rs, d, 0, send_buf.data(), kMaxMsg, chunk, args.timeout_s);
  if (!p.a->Flush()) Fail("flush before the fence: " + p.a->rx_error());
  if (!lossy.empty()) {
    // Long enough for the QP to transmit and start retrying, short of its retry limit (~270 ms).
    const auto until = Clk::now() + std::chrono::milliseconds(60);
    while (Clk::now() < until) (void)p.a->Flush();
  }
  const int posted = p.a->Sample().unacked_segments / 2;  // work requests: two per data chunk (header SEND + WRITE)
  const auto tf = Clk::now();
  p.a->Fence();
  const double fence_ms = Seconds(tf, Clk::now()) * 1e3;
  if (!p.a->Quiescent() || p.a->PendingError() != 0)
    Fail("after Fence: quiescent " + std::to_string(p.a->Quiescent()) + " pending error " +
         std::to_string(p.a->PendingError()) + " " + p.a->rx_error());
  std::vector<char> snap(recv_buf.begin(), recv_buf.end());
  if (!lossy.empty()) Sh("tc qdisc del dev " + lossy + " root");
  // Let the receiver run and anything still in the wire arrive, then look again.
  const auto until = Clk::now() + std::chrono::milliseconds(1500);
  while (Clk::now() < until) {
    (void)p.b->Poll(rs);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (std::memcmp(snap.data(), recv_buf.data(), snap.size()) != 0) {
    uint64_t at = 0;
    while (snap[at] == recv_buf[at]) ++at;
    Fail("a WRITE landed after Fence returned (first changed byte " + std::to_string(at) + ")");
  }
  // The fenced path refuses new work, and nothing it is handed lands.
  QueueMessage(*p.a, p, ss, rs, d, 1, send_buf.data(), chunk, chunk, args.timeout_s);
  if (p.a->Flush()) Fail("Flush on a fenced path succeeded");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (void)p.b->Poll(rs);
  if (std::memcmp(snap.data(), recv_buf.data(), snap.size()) != 0) Fail("a fenced path's new chunk landed");
  int landed = 0, partial = 0;
  for (uint64_t off = 0; off < kMaxMsg; off += chunk) {
    uint64_t n = 0;
    for (uint64_t i = off; i < off + chunk; ++i) n += static_cast<unsigned char>(recv_buf[i]) == 0xAB;
    if (n == chunk) ++landed;
    else if (n > 0) ++partial;
  }
  const int chunks = static_cast<int>(kMaxMsg / chunk);
  std::printf("PASS: Fence (%s) in %.1f ms with %d of %d chunks outstanding: %d landed whole, %d partly, %d not at "
              "all, receiver saw %d; nothing changed in the 1.8 s after it%s\n",
              lossy.empty() ? "working link" : ("100% loss on " + lossy).c_str(), fence_ms, posted, chunks, landed,
              partial, chunks - landed - partial, rs.chunks, lossy.empty() ? "" : " (link restored)");
  if (!lossy.empty() && landed + partial == chunks) Fail("the lossy fence test had nothing in flight");
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dev-a") a.dev_a = v;
    else if (k == "--dev-b") a.dev_b = v;
    else if (k == "--gid-a") a.gid_a = std::stoi(v);
    else if (k == "--gid-b") a.gid_b = std::stoi(v);
    else if (k == "--messages") a.messages = std::stoi(v);
    else if (k == "--bw-iters") a.bw_iters = std::stoi(v);
    else if (k == "--bw-size") a.bw_size = std::stoull(v);
    else if (k == "--seed") a.seed = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--timeout") a.timeout_s = std::stoi(v);
    else if (k == "--lossy-netdev") a.lossy_netdev = v;
    else Fail("unknown option " + k);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  const IbverbsLoader& ib = IbverbsLoader::Get();
  if (!ib.available() || ib.DeviceCount() == 0) {
    std::printf("SKIP: no verbs devices (%s)\n", ib.available() ? "none listed" : ib.error().c_str());
    return 77;
  }
  std::unique_ptr<RdmaDevice> da, db;
  Check(OpenRdmaDevice(ib, args.dev_a, 1, args.gid_a, &da), "opening " + args.dev_a);
  Check(OpenRdmaDevice(ib, args.dev_b, 1, args.gid_b, &db), "opening " + args.dev_b);
  std::printf("devices: %s (netdev %s, mtu enum %d) -> %s (netdev %s)\n", da->name.c_str(), da->netdev.c_str(),
              static_cast<int>(da->active_mtu), db->name.c_str(), db->netdev.c_str());

  // Buffers registered up front, as NCCL's regMr would: chunk registrations then hit the cache.
  std::vector<char> send_buf(kMaxMsg + kGuard), recv_buf(kMaxMsg + kGuard);
  MrRef send_mr, recv_mr;
  Check(da->mrs->Acquire(send_buf.data(), send_buf.size(), &send_mr), "registering the send buffer");
  Check(db->mrs->Acquire(recv_buf.data(), recv_buf.size(), &recv_mr), "registering the receive buffer");

  // 1. Messages of 1 B .. 4 MiB, byte for byte, with a control frame each way per message.
  {
    Pair p = MakePair(*da, *db, 0);
    SenderSink ss;
    ReceiverSink rs;
    rs.base = recv_buf.data();
    rs.capacity = kMaxMsg;
    std::mt19937_64 rng(args.seed);
    uint64_t total = 0;
    for (int i = 0; i < args.messages; ++i) {
      const uint64_t seq = static_cast<uint64_t>(i);
      const uint64_t size = i == 0 ? 1 : i == 1 ? kMaxMsg : 1 + rng() % kMaxMsg;
      std::memset(recv_buf.data(), 0xEE, size + kGuard);
      rs.seq_lo = seq;
      rs.seq_hi = seq + 1;
      rs.got_bytes = 0;
      const size_t before = ss.descs.size();
      Publish(*p.b, seq, kMaxMsg, recv_buf.data(), recv_mr.handle.rkey);
      DriveUntil(p, ss, rs, [&] { return ss.descs.size() > before; }, "the receiver's descriptor", args.timeout_s);
      const RecvDescriptor d = ss.descs.back();
      if (d.seq != seq || d.addr != reinterpret_cast<uintptr_t>(recv_buf.data())) Fail("descriptor garbled");
      Fill(send_buf.data(), size, args.seed + seq);
      QueueMessage(*p.a, p, ss, rs, d, seq, send_buf.data(), size, args.chunk, args.timeout_s);
      PathEventMsg ev{0, static_cast<uint16_t>(PathEvent::kNicRecovered), static_cast<uint32_t>(i)};
      const int events_a = ss.events, events_b = rs.events;
      p.a->Queue(ControlHeader(FrameType::kPathEvent, sizeof(ev), 0), reinterpret_cast<const char*>(&ev));
      p.b->Queue(ControlHeader(FrameType::kPathEvent, sizeof(ev), 0), reinterpret_cast<const char*>(&ev));
      DriveUntil(p, ss, rs,
                 [&] {
                   return rs.got_bytes == size && rs.events > events_b && ss.events > events_a && p.a->Quiescent() &&
                          p.b->Quiescent();
                 },
                 "message " + std::to_string(i), args.timeout_s);
      if (std::memcmp(recv_buf.data(), send_buf.data(), size) != 0) {
        uint64_t at = 0;
        while (recv_buf[at] == send_buf[at]) ++at;
        Fail("message " + std::to_string(i) + " (" + std::to_string(size) + " B) differs at byte " + std::to_string(at));
      }
      for (uint64_t g = size; g < size + kGuard; ++g)
        if (static_cast<unsigned char>(recv_buf[g]) != 0xEE) Fail("message " + std::to_string(i) + " wrote past its end");
      total += size;
    }
    const PathSample s = p.a->Sample();
    if (!s.valid || s.bytes_acked != total || s.unacked_segments != 0)
      Fail("sender sample: bytes_acked " + std::to_string(s.bytes_acked) + " want " + std::to_string(total));
    std::printf("PASS: %d messages (1 B .. 4 MiB, %llu bytes, %d chunks) byte for byte; %d control frames each way; "
                "sample bytes_acked=%llu segs_out=%llu rto_us=%u\n",
                args.messages, static_cast<unsigned long long>(total), rs.chunks, ss.events,
                static_cast<unsigned long long>(s.bytes_acked), static_cast<unsigned long long>(s.segs_out), s.rto_us);

    // 2. Bandwidth: bw_iters messages of bw_size, one chunk each, into the same posted buffer (as
    //    ib_write_bw writes one buffer over and over), the send ring kept full.
    const uint64_t base_seq = 1000;
    rs.seq_lo = base_seq;
    rs.seq_hi = base_seq + static_cast<uint64_t>(args.bw_iters);
    rs.got_bytes = 0;
    const size_t before = ss.descs.size();
    Publish(*p.b, base_seq, args.bw_size, recv_buf.data(), recv_mr.handle.rkey);
    DriveUntil(p, ss, rs, [&] { return ss.descs.size() > before; }, "the bandwidth descriptor", args.timeout_s);
    const RecvDescriptor d = ss.descs.back();
    Fill(send_buf.data(), args.bw_size, 7);
    const auto t0 = Clk::now();
    for (int i = 0; i < args.bw_iters; ++i)
      QueueMessage(*p.a, p, ss, rs, d, base_seq + static_cast<uint64_t>(i), send_buf.data(), args.bw_size,
                   args.bw_size, args.timeout_s);
    const uint64_t want = args.bw_size * static_cast<uint64_t>(args.bw_iters);
    DriveUntil(p, ss, rs, [&] { return rs.got_bytes == want && p.a->Quiescent(); }, "the bandwidth run",
               args.timeout_s * 4);
    const double sec = Seconds(t0, Clk::now());
    if (std::memcmp(recv_buf.data(), send_buf.data(), args.bw_size) != 0) Fail("bandwidth payload differs");
    // MB = 2^20 bytes, as perftest reports.
    std::printf("RESULT rdma_path_write_bw size=%llu iters=%d avg=%.2f MB/s (%.3f s)\n",
                static_cast<unsigned long long>(args.bw_size), args.bw_iters,
                static_cast<double>(want) / 1048576.0 / sec, sec);
  }

  // 3. A completion error: a wrong remote key makes the WRITE fail; PendingError reports it.
  {
    Pair p = MakePair(*da, *db, 1);
    SenderSink ss;
    ReceiverSink rs;
    rs.base = recv_buf.data();
    rs.capacity = kMaxMsg;
    rs.seq_hi = 1;
    RecvDescriptor d{};
    d.seq = 0;
    d.capacity = kMaxMsg;
    d.group_n = 1;
    d.addr = reinterpret_cast<uintptr_t>(recv_buf.data());
    d.keys[0] = recv_mr.handle.rkey ^ 0x00ff0000u;
    QueueMessage(*p.a, p, ss, rs, d, 0, send_buf.data(), 4096, 4096, args.timeout_s);
    (void)p.a->Flush();
    const auto deadline = Clk::now() + std::chrono::seconds(args.timeout_s);
    while (p.a->PendingError() == 0 && Clk::now() < deadline) {
      (void)p.a->Flush();
      (void)p.a->Poll(ss);
      (void)p.b->Poll(rs);  // the responder fails too: its errors are expected here
    }
    if (p.a->PendingError() != EACCES)
      Fail("a write with a wrong rkey: PendingError " + std::to_string(p.a->PendingError()) + ", want EACCES: " +
           p.a->DebugState());
    std::printf("PASS: wrong rkey -> PendingError=EACCES (%s)\n", p.a->rx_error().c_str());
    p.a->Fence();
    if (!p.a->Quiescent()) Fail("not quiescent after fencing a failed QP");
  }

  // 4. Fence, twice: on a working link (the chunks may all land before the fence; afterwards nothing
  //    changes), and with the link dropping every packet (netem loss 100%, --lossy-netdev), so the
  //    chunks sit in the QP's retransmissions when the fence comes; the link is then restored, and
  //    nothing may land: that is the failback case, where the buffer is reused.
  FenceTest(*da, *db, 2, "", send_buf, recv_buf, recv_mr, args);
  if (!args.lossy_netdev.empty()) FenceTest(*da, *db, 3, args.lossy_netdev, send_buf, recv_buf, recv_mr, args);
  Check(da->mrs->Release(send_mr), "releasing the send buffer");
  Check(db->mrs->Release(recv_mr), "releasing the receive buffer");
  std::printf("PASS: rdma_path_vm_test\n");
  return 0;
}
