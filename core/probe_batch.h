// Completed messages, gathered for the msgs_done USDT probe while a tracer is attached to it.
#pragma once

#include <cstdint>

#include "core/probe_record.h"
#include "core/probes.h"

namespace ff {

// The per-message probes (send_done/recv_done) cost an attached tracer one uprobe hit per message:
// ~1.3 us of CPU here (a system call into the kernel and the BPF program). `flexiforce probe`
// attaches msgs_done instead: a communicator appends each completed message (24 bytes) here and
// fires the probe once per FF_PROBE_BATCH_MAX messages, on progress once the oldest waited
// kMaxAgeNs, and when it closes. Unattached, a completion costs the semaphore's load and branch,
// like any probe site. Records still here when the tracer detaches are dropped, not reported late.
// Plain data: the probe macros below (which see FF_HAVE_SDT) do the firing, so builds with and
// without probes can share this class in one binary.
class ProbeBatch {
 public:
  static constexpr uint64_t kMaxAgeNs = 100'000'000ull;  // a live table refreshes each second

  struct Source {  // the communicator's identity, passed once per firing
    uint64_t task_hash;
    const char* peer;
    const char* task;
    uint64_t sla_us;
  };

  // Appends one message; true when the batch is full and must be fired.
  bool Append(uint8_t dir, uint16_t collective, uint64_t bytes, int path, uint64_t latency_ns, uint64_t now_ns) {
    if (n_ == 0) first_ns_ = now_ns;
    ff_probe_record& r = records_[n_++];
    r.latency_ns = latency_ns;
    r.bytes = bytes;
    r.path = path;
    r.collective = collective;
    r.dir = dir;
    r.reserved = 0;
    return n_ == FF_PROBE_BATCH_MAX;
  }
  bool Old(uint64_t now_ns) const { return n_ != 0 && now_ns - first_ns_ >= kMaxAgeNs; }
  const ff_probe_record* records() const { return records_; }
  uint64_t count() const { return n_; }
  void Clear() { n_ = 0; }

 private:
  uint32_t n_ = 0;
  uint64_t first_ns_ = 0;
  ff_probe_record records_[FF_PROBE_BATCH_MAX];
};

}  // namespace ff

// Fires what `batch` holds (if anything) and empties it.
#define FF_PROBE_BATCH_FIRE(batch, src)                                                                  \
  do {                                                                                                   \
    if ((batch).count() != 0) {                                                                          \
      const ::ff::ProbeBatch::Source ff_probe_src_ = (src);                                              \
      /* The probe's asm takes only the pointer: without this barrier the compiler may still hold \
         the last records' stores when the tracer reads the array (seen: fields of other records). */ \
      asm volatile("" ::: "memory");                                                                     \
      FF_PROBE(msgs_done, ff_probe_src_.task_hash, ff_probe_src_.peer, ff_probe_src_.task,               \
               ff_probe_src_.sla_us, (batch).records(), (batch).count());                                \
      (batch).Clear();                                                                                   \
    }                                                                                                    \
  } while (0)

// One completed message: appended while a tracer is attached to msgs_done (fired when the batch is
// full); otherwise whatever waited from an earlier attachment is dropped.
#define FF_PROBE_BATCH_ADD(batch, src, dir, collective, bytes, path, latency_ns, now_ns)                 \
  do {                                                                                                   \
    if (FF_PROBE_ENABLED(msgs_done)) {                                                                   \
      if ((batch).Append(dir, collective, bytes, path, latency_ns, now_ns)) FF_PROBE_BATCH_FIRE(batch, src); \
    } else if ((batch).count() != 0) {                                                                   \
      (batch).Clear();                                                                                   \
    }                                                                                                    \
  } while (0)
