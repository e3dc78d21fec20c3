// libFuzzer target: a hostile peer on the other end of a communicator's streams. The input scripts
// what arrives on each path - sealed frames of every type with fuzzed fields and payloads (so they
// pass the checksum and reach the communicator's handling), raw bytes, end of stream, a reset - and
// what the local side does meanwhile (irecv/isend of buffers with fuzzed sizes and tags, test,
// progress), on a receiving or a sending communicator over 1-3 StreamPaths.
//
// Every buffer is its own heap allocation of exactly its size, so ASan reports any byte written
// outside the posted buffers; beyond that a completed receive must report at most its capacity and a
// completed send its own size. Errors are expected (most inputs are protocol violations); a crash,
// a sanitizer report or a broken completion is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm.h"
#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "core/wire_format.h"
#include "tcp/byte_stream.h"
#include "tcp/stream_path.h"

namespace {

// What the peer sent on one path and has not been read yet; what the local side writes is dropped.
struct Wire {
  std::string bytes;
  size_t pos = 0;
  bool eof = false;    // the peer closed: reads return end of stream once the bytes are read
  bool reset = false;  // every call fails as a reset connection
};

class ScriptStream final : public ff::ByteStream {
 public:
  explicit ScriptStream(std::shared_ptr<Wire> w) : w_(std::move(w)) {}
  ssize_t Send(const iovec* iov, int n) override {
    if (w_->reset) {
      errno = ECONNRESET;
      return -1;
    }
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    return static_cast<ssize_t>(total);
  }
  ssize_t Recv(void* buf, size_t len) override {
    if (w_->reset) {
      errno = ECONNRESET;
      return -1;
    }
    const size_t left = w_->bytes.size() - w_->pos;
    if (left == 0) return w_->eof ? -2 : 0;
    const size_t n = std::min(left, len);
    std::memcpy(buf, w_->bytes.data() + w_->pos, n);
    w_->pos += n;
    if (w_->pos == w_->bytes.size()) {
      w_->bytes.clear();
      w_->pos = 0;
    }
    return static_cast<ssize_t>(n);
  }
  std::string Describe() const override { return "fuzz stream"; }
  int fd() const override { return -1; }

 private:
  std::shared_ptr<Wire> w_;
};

constexpr uint32_t kMaxPayload = 16384;  // per scripted frame (the header may claim more)
constexpr uint64_t kMaxBuffer = 96 * 1024;

template <typename T>
void Append(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// A sealed frame of a fuzzed type and fields, with a payload that usually matches its length. Data
// frames are mostly well formed (a message posted or about to be, a chunk at a chunk boundary of a
// size a buffer could hold) so that deliveries, completions and acknowledgements are reached; the
// rest of the time any field may be anything.
void ScriptFrame(FuzzedDataProvider& in, std::string& out, uint64_t seq_hint, uint64_t chunk) {
  ff::FrameHeader h{};
  const uint8_t kTypes[] = {1, 1, 1, 1, 2, 2, 2, 3, 4, 5, 6, 7, 0, 8};
  h.type = kTypes[in.ConsumeIntegralInRange<size_t>(0, sizeof(kTypes) - 1)];
  h.path = in.ConsumeIntegralInRange<uint16_t>(0, 3);
  h.tag = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  if (h.type == 1 && in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0) {
    h.seq = in.ConsumeIntegralInRange<uint64_t>(0, seq_hint + 1);
    h.total = in.ConsumeIntegralInRange<uint64_t>(0, in.ConsumeBool() ? 2 * chunk : kMaxBuffer);
    const uint64_t chunks = h.total == 0 ? 1 : (h.total + chunk - 1) / chunk;
    h.offset = in.ConsumeIntegralInRange<uint64_t>(0, chunks - 1) * chunk;
  } else {
    h.seq = seq_hint + in.ConsumeIntegralInRange<uint64_t>(0, 6) - (in.ConsumeBool() ? 2 : 0);
    h.total = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, kMaxBuffer + 1024) : in.ConsumeIntegral<uint64_t>();
    h.offset = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<uint64_t>(0, h.total + 64);
  }
  h.flags = in.ConsumeIntegral<uint16_t>();
  h.collective = in.ConsumeIntegral<uint16_t>();
  std::string payload;
  switch (static_cast<ff::FrameType>(h.type)) {
    case ff::FrameType::kAck: {
      ff::AckMsg a{};
      a.cum_done = seq_hint + in.ConsumeIntegralInRange<uint64_t>(0, 8) - (in.ConsumeBool() ? 3 : 0);
      const uint32_t nd = in.ConsumeIntegralInRange<uint32_t>(0, ff::kMaxDescriptorsPerAck);
      a.descriptors = in.ConsumeBool() ? nd : in.ConsumeIntegralInRange<uint32_t>(0, 40);
      Append(payload, a);
      for (uint32_t i = 0; i < nd; ++i) {
        ff::RecvDescriptor d{};
        d.seq = seq_hint + in.ConsumeIntegralInRange<uint64_t>(0, 40) - (in.ConsumeBool() ? 4 : 0);
        d.capacity = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, kMaxBuffer) : in.ConsumeIntegral<uint64_t>();
        d.tag = in.ConsumeIntegralInRange<int32_t>(-1, 3);
        d.group_n = in.ConsumeIntegralInRange<uint16_t>(0, 9);
        d.group_idx = in.ConsumeIntegralInRange<uint16_t>(0, 9);
        d.addr = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint64_t>();
        d.keys[0] = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint32_t>();
        Append(payload, d);
      }
      break;
    }
    case ff::FrameType::kPathEvent: {
      ff::PathEventMsg e{};
      e.path = in.ConsumeIntegralInRange<uint16_t>(0, 4);
      e.event = in.ConsumeIntegralInRange<uint16_t>(0, 5);
      e.generation = in.ConsumeIntegralInRange<uint32_t>(0, 3);
      Append(payload, e);
      break;
    }
    case ff::FrameType::kAbort: {
      ff::AbortMsg a{};
      a.reason = in.ConsumeIntegralInRange<int32_t>(0, 3);
      a.seq = seq_hint;
      Append(payload, a);
      break;
    }
    default: {
      if (static_cast<ff::FrameType>(h.type) == ff::FrameType::kData) {
        // The chunk's bytes: usually all of them (a pattern, cheap on input), sometimes fuzzed and short.
        const uint64_t len = std::min<uint64_t>(std::min(chunk, h.total - std::min(h.total, h.offset)), kMaxPayload);
        if (in.ConsumeBool())
          payload.assign(len, static_cast<char>(h.seq));
        else
          payload = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, len));
      } else {
        payload = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<uint32_t>(0, 96));
      }
      break;
    }
  }
  // Usually the length says what follows; sometimes it lies (a truncated or overlong frame).
  h.length = in.ConsumeIntegralInRange<uint8_t>(0, 15) != 0 ? static_cast<uint32_t>(payload.size())
                                                             : in.ConsumeIntegralInRange<uint32_t>(0, kMaxPayload * 2);
  ff::SealHeader(&h);
  if (in.ConsumeIntegralInRange<uint8_t>(0, 31) == 0) h.checksum ^= 1;  // now and then a corrupt one
  Append(out, h);
  out += payload;
}

struct Buffers {
  std::vector<std::unique_ptr<char[]>> held;  // alive until the communicator is gone
  char* Make(size_t n, FuzzedDataProvider& in) {
    held.emplace_back(new char[n == 0 ? 1 : n]);
    std::memset(held.back().get(), in.ConsumeIntegral<uint8_t>(), n == 0 ? 1 : n);
    return held.back().get();
  }
};

// The script both sides share: frames and raw bytes from the peer, end of stream and resets, and
// progress; `post` and `test` are the side's own calls (test returns false to stop: the communicator
// failed and NCCL would close it). `seq` is where the peer's sequence numbers aim.
template <typename Post, typename Test>
void Drive(FuzzedDataProvider& in, ff::Comm& comm, std::vector<std::shared_ptr<Wire>>& wires, uint64_t chunk,
           const uint64_t& seq, Post post, Test test) {
  for (int step = 0; step < 200 && in.remaining_bytes() > 0; ++step) {
    Wire& w = *wires[in.ConsumeIntegralInRange<size_t>(0, wires.size() - 1)];
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
      case 1:
        ScriptFrame(in, w.bytes, seq, chunk);
        break;
      case 2:
        w.bytes += in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, 200));
        break;
      case 3:
        post();
        break;
      case 4:
      case 5:
        if (!test()) return;
        break;
      case 6:
        (in.ConsumeBool() ? w.eof : w.reset) = true;
        break;
      default:
        (void)comm.Progress();
        break;
    }
  }
}

// Tests one pending request the input picks (progress when none is pending); `test_and_check(p)`
// tests it and checks a completion, returning (status, done). False: stop (the input chose to on a
// failed communicator).
template <typename Pending, typename TestAndCheck>
bool TestOne(FuzzedDataProvider& in, ff::Comm& comm, std::deque<Pending>& pending, TestAndCheck test_and_check) {
  if (pending.empty()) return comm.Progress().ok() || !in.ConsumeBool();
  const size_t k = in.ConsumeIntegralInRange<size_t>(0, pending.size() - 1);
  const auto [s, done] = test_and_check(pending[k]);
  if (!done) return s.ok() || !in.ConsumeBool();
  pending.erase(pending.begin() + static_cast<long>(k));
  return true;
}

void RunRecv(FuzzedDataProvider& in, std::vector<std::unique_ptr<ff::Path>> paths, const ff::CommOptions& o,
             std::vector<std::shared_ptr<Wire>>& wires) {
  Buffers bufs;
  auto comm = std::make_unique<ff::RecvComm>(std::move(paths), o, "fuzz peer");
  struct Pending {
    ff::RecvRequest* r;
    int n;
    uint64_t cap[8];
  };
  std::deque<Pending> pending;
  uint64_t posted = 0;
  auto post = [&] {
    if (pending.size() >= 8) return;
    Pending p{};
    p.n = in.ConsumeIntegralInRange<int>(1, 8);
    void* data[8];
    int tags[8];
    for (int i = 0; i < p.n; ++i) {
      p.cap[i] = in.ConsumeIntegralInRange<uint64_t>(0, kMaxBuffer);
      data[i] = bufs.Make(p.cap[i], in);
      tags[i] = in.ConsumeIntegralInRange<int32_t>(-1, 2);
    }
    if (!comm->Irecv(p.n, data, p.cap, tags, &p.r).ok() || p.r == nullptr) return;
    pending.push_back(p);
    posted += static_cast<uint64_t>(p.n);
  };
  auto test = [&] {
    return TestOne(in, *comm, pending, [&](const Pending& p) {
      int done = 0;
      uint64_t sizes[8] = {};
      const ff::Status s = comm->Test(p.r, &done, sizes);
      for (int i = 0; done && i < p.n; ++i)
        if (sizes[i] > p.cap[i]) __builtin_trap();  // more than the buffer holds
      return std::make_pair(s, done != 0);
    });
  };
  Drive(in, *comm, wires, o.chunk_bytes, posted, post, test);
  comm->AcknowledgeBeforeClose();
}

void RunSend(FuzzedDataProvider& in, std::vector<std::unique_ptr<ff::Path>> paths, const ff::CommOptions& o,
             std::vector<std::shared_ptr<Wire>>& wires) {
  Buffers bufs;
  auto comm = std::make_unique<ff::SendComm>(std::move(paths), o, "fuzz peer");
  struct Pending {
    ff::SendRequest* r;
    uint64_t size;
  };
  std::deque<Pending> pending;
  uint64_t sent = 0;
  auto post = [&] {
    if (pending.size() >= 16) return;
    Pending p{};
    p.size = in.ConsumeIntegralInRange<uint64_t>(0, kMaxBuffer);
    const char* data = bufs.Make(p.size, in);
    if (!comm->Isend(data, p.size, in.ConsumeIntegralInRange<int32_t>(-1, 3), nullptr, &p.r).ok() || p.r == nullptr)
      return;
    pending.push_back(p);
    ++sent;
  };
  auto test = [&] {
    return TestOne(in, *comm, pending, [&](const Pending& p) {
      int done = 0;
      uint64_t size = 0;
      const ff::Status s = comm->Test(p.r, &done, &size);
      if (done && size != p.size) __builtin_trap();  // a send completes with its own size
      return std::make_pair(s, done != 0);
    });
  };
  Drive(in, *comm, wires, o.chunk_bytes, sent, post, test);
  // A bounded close: what the hostile receiver never acknowledges is given up after 0.1 ms.
  (void)comm->DrainForClose(100'000);
}

}  // namespace

// Nearly every input fails the communicator with a WARN: quiet by default (the lines are still
// formatted); NCCL_DEBUG=WARN in the environment shows them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("NCCL_DEBUG", "NONE", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool send_side = in.ConsumeBool();
  const int npaths = in.ConsumeIntegralInRange<int>(1, 3);
  ff::CommOptions o;
  o.chunk_bytes = uint64_t{1024} << in.ConsumeIntegralInRange<int>(0, 4);  // 1-16 KiB: multi-chunk messages
  o.stripe_min_bytes = in.ConsumeBool() ? 0 : 16 * 1024;
  o.max_queued_chunks = in.ConsumeIntegralInRange<int>(1, 8);
  o.eager_bytes = in.ConsumeBool() ? 0 : uint64_t{1} << in.ConsumeIntegralInRange<int>(6, 16);
  o.eager_ring_bytes = o.eager_bytes ? 256 * 1024 : 0;
  o.ack_batch = in.ConsumeIntegralInRange<uint32_t>(1, 16);
  o.ack_delay_us = in.ConsumeIntegralInRange<uint32_t>(0, 100);
  o.resend_timeout_ms = in.ConsumeBool() ? 0 : 1;
  std::vector<std::shared_ptr<Wire>> wires;
  std::vector<std::unique_ptr<ff::Path>> paths;
  // Staging smaller than a real connection's 256 KiB, and different per path: inputs (at most 16 KB)
  // then reach the buffer's compaction and header-split boundaries, and an input costs no 256 KiB
  // write per path (the constructor faults staging in: it had cut the inputs run per second 2.5-fold).
  static constexpr size_t kStaging[3] = {4096, ff::StreamPath::kMinStagingBytes, 1000};
  for (int i = 0; i < npaths; ++i) {
    wires.push_back(std::make_shared<Wire>());
    paths.push_back(
        std::make_unique<ff::StreamPath>(i, std::make_unique<ScriptStream>(wires.back()), kStaging[i]));
  }
  if (send_side)
    RunSend(in, std::move(paths), o, wires);
  else
    RunRecv(in, std::move(paths), o, wires);
  return 0;
}
