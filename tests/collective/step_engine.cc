// The pipelined step loop shared by both backends.
#include "tests/collective/step_engine.h"

#include <sched.h>

#include <cstring>
#include <vector>

namespace ff::collective {

StepEngine::StepEngine(RingTransport& transport, AbortContext& ctx, const EngineBuffers& buffers, int window,
                       DataType dtype, bool corrupt, bool test_all)
    : transport_(transport),
      ctx_(ctx),
      buffers_(buffers),
      window_(window),
      dtype_(dtype),
      corrupt_(corrupt),
      test_all_(test_all) {}

void StepEngine::Run(const RingSchedule& schedule) {
  const auto& sends = schedule.sends;
  const auto& recvs = schedule.recvs;
  if (schedule.local_copy_bytes > 0) {
    std::memcpy(buffers_.recv + schedule.local_copy_dst, buffers_.send + schedule.local_copy_src,
                schedule.local_copy_bytes);
  }
  const size_t ns = sends.size();
  const size_t nr = recvs.size();
  const size_t window = static_cast<size_t>(window_);
  std::vector<RequestId> send_req(ns), recv_req(nr);
  std::vector<char> send_done(ns, 0), recv_done(nr, 0);
  size_t s_post = 0, r_post = 0, s_low = 0, r_low = 0;
  bool corrupted = !corrupt_;

  auto step_text = [&](const char* dir, size_t i, size_t n) {
    return std::string(dir) + " step " + std::to_string(i) + "/" + std::to_string(n);
  };
  auto fail = [&](const DriverError& e, const std::string& where) -> DriverError {
    return DriverError(ctx_.Prefix() + e.what() + " (" + ctx_.Phase() + ", " + where + ")");
  };

  unsigned spins = 0;
  while (s_low < ns || r_low < nr) {
    bool progressed = false;
    try {
      transport_.Progress();
    } catch (const DriverError& e) {
      throw fail(e, "progress");
    }

    // Receives are posted ahead independently of sends so the upstream rank never stalls on us.
    while (r_post < nr && r_post < r_low + window) {
      const RecvStep& st = recvs[r_post];
      std::byte* dst = st.reduce ? buffers_.staging + (r_post % window) * buffers_.slot_bytes
                                 : buffers_.recv + st.offset;
      std::optional<RequestId> req;
      try {
        req = transport_.PostRecv(st.reduce ? buffers_.staging_region : buffers_.recv_region, dst, st.bytes);
      } catch (const DriverError& e) {
        throw fail(e, step_text("posting receive", r_post, nr));
      }
      if (!req) break;
      recv_req[r_post++] = *req;
      progressed = true;
    }
    while (s_post < ns && s_post < s_low + window) {
      const SendStep& st = sends[s_post];
      if (st.after_recv >= 0 && !recv_done[static_cast<size_t>(st.after_recv)]) break;
      const bool from_send = st.buffer == Buffer::kSend;
      const std::byte* src = (from_send ? buffers_.send : buffers_.recv) + st.offset;
      std::optional<RequestId> req;
      try {
        req = transport_.PostSend(from_send ? buffers_.send_region : buffers_.recv_region, src, st.bytes);
      } catch (const DriverError& e) {
        throw fail(e, step_text("posting send", s_post, ns));
      }
      if (!req) break;
      send_req[s_post++] = *req;
      progressed = true;
    }

    for (size_t i = r_low; i < r_post; ++i) {
      if (recv_done[i]) continue;
      size_t got = 0;
      bool done;
      try {
        done = transport_.Test(recv_req[i], &got);
      } catch (const DriverError& e) {
        throw fail(e, step_text("receive", i, nr));
      }
      if (!done) {
        if (test_all_) continue;
        break;  // NCCL's proxy: the next step's request is tested again on the next pass
      }
      const RecvStep& st = recvs[i];
      if (got != st.bytes) {
        throw DriverError(ctx_.Prefix() + "receive step " + std::to_string(i) + " of " + ctx_.Phase() +
                          " completed with " + std::to_string(got) + " bytes, expected " +
                          std::to_string(st.bytes));
      }
      std::byte* landed = st.reduce ? buffers_.staging + (i % window) * buffers_.slot_bytes : buffers_.recv + st.offset;
      if (!corrupted && st.bytes > 0) {
        landed[0] ^= std::byte{0x40};
        corrupted = true;
      }
      if (st.reduce) ReduceSum(dtype_, buffers_.recv + st.offset, buffers_.send + st.offset, landed, st.bytes);
      recv_done[i] = 1;
      ++traffic_.recvs;
      traffic_.recv_bytes += got;
      progressed = true;
    }
    while (r_low < nr && recv_done[r_low]) ++r_low;

    for (size_t i = s_low; i < s_post; ++i) {
      if (send_done[i]) continue;
      size_t got = 0;
      bool done;
      try {
        done = transport_.Test(send_req[i], &got);
      } catch (const DriverError& e) {
        throw fail(e, step_text("send", i, ns));
      }
      if (!done) {
        if (test_all_) continue;
        break;
      }
      send_done[i] = 1;
      ++traffic_.sends;
      traffic_.send_bytes += sends[i].bytes;
      progressed = true;
    }
    while (s_low < ns && send_done[s_low]) ++s_low;

    // Deadline and peer liveness: on every idle pass, and now and then while busy.
    if (!progressed || (++spins & 255) == 0) {
      ctx_.Check("waiting on send step " + std::to_string(s_low) + "/" + std::to_string(ns) + ", receive step " +
                 std::to_string(r_low) + "/" + std::to_string(nr));
      if (!progressed) sched_yield();
    }
  }
}

}  // namespace ff::collective
