// Profiler-side event objects in a preallocated pool, linked to their parents, and the walk
// that attributes a network message to its collective.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "sla/collective_id.h"

namespace ff::sla {

// A profiler event as NCCL describes it, independent of the ABI version that delivered it.
struct ProfilerEventInfo {
  uint64_t type = 0;         // one ncclProfile* bit
  void* parent = nullptr;    // parent handle as this pool returned it (may be null or foreign)
  int rank = -1;
  // Coll / P2p
  const char* func = nullptr;
  const char* datatype = nullptr;
  const char* algo = nullptr;
  uint64_t seq_number = 0;
  uint64_t count = 0;
  int peer = -1;
  // ProxyOp
  int channel = -1;
  int is_send = -1;
  // ProxyStep
  int step = -1;
};

// The pool. All methods are thread-safe and allocation-free: NCCL starts Coll events on the
// user's thread and proxy events on the proxy thread, and they stop in any order.
//
// Lifetime: each event holds a reference on itself and one per live child, so a parent outlives
// its children. NCCL stops a Coll (or P2p) event right after the kernel launch, often before
// the proxy thread has started the ProxyOp that names it as parent; so a stopped Coll/P2p
// lingers in a ring of the `linger` most recently stopped ones until newer ones push it out.
// Attribution is therefore right as long as the proxy thread lags the host by fewer than
// `linger` collectives, far more than NCCL lets the host run ahead.
class ProfilerEventPool {
 public:
  struct Event;

  explicit ProfilerEventPool(uint32_t capacity = 32768, uint32_t linger = 4096);
  ~ProfilerEventPool();
  ProfilerEventPool(const ProfilerEventPool&) = delete;
  ProfilerEventPool& operator=(const ProfilerEventPool&) = delete;

  // Starts an event; nullptr when the pool is exhausted (NCCL accepts a null handle; the
  // events below it then attribute as unknown). Unknown types are not tracked (nullptr).
  void* Start(const ProfilerEventInfo& info);

  // Stops an event started by Start; null and foreign handles are ignored.
  void Stop(void* handle);

  // Walks from any event in this pool (NetPlugin, ProxyStep, ProxyOp, Coll, P2p) up to its
  // Coll or P2p ancestor. Source kNone when the handle is not a live event of this pool or
  // no Coll/P2p ancestor exists.
  CollectiveAttribution Attribute(void* handle) const;

  // Attribution for the `phandle` NCCL passes to the net plugin's isend/irecv. Since NCCL 2.27
  // it points to NCCL's per-step record whose first member is the ProxyStep event handle this
  // profiler returned; the value read there is used only after it is proven to be a live
  // ProxyStep event of this pool, so a foreign profiler or no profiler yields kNone safely.
  CollectiveAttribution AttributeNetEvent(void* phandle) const;

  // True when `handle` points to an event slot of this pool.
  bool Owns(const void* handle) const;

  uint32_t LiveEvents() const { return live_.load(std::memory_order_relaxed); }
  uint64_t Exhausted() const { return exhausted_.load(std::memory_order_relaxed); }
  uint32_t Capacity() const { return capacity_; }

 private:
  Event* Allocate();
  void Unref(Event* e) const;
  bool TryRef(Event* e) const;
  Event* AsEvent(const void* handle) const;

  const uint32_t capacity_;
  const uint32_t linger_size_;
  std::unique_ptr<Event[]> events_;
  std::unique_ptr<std::atomic<Event*>[]> linger_;
  std::atomic<uint64_t> linger_next_{0};
  // Free list head: low 32 bits the slot index (capacity_ = empty), high 32 bits an ABA tag.
  mutable std::atomic<uint64_t> free_head_;
  mutable std::atomic<uint32_t> live_{0};
  std::atomic<uint64_t> exhausted_{0};
};

// The pool behind the exported ncclProfiler_v4/v5 tables; created by the first profiler init.
// nullptr until then, so the communicator's AttributeNetEvent returns kNone without a profiler.
ProfilerEventPool* GlobalProfilerPool();
ProfilerEventPool& EnsureGlobalProfilerPool();

// Convenience for the communicator: GlobalProfilerPool()->AttributeNetEvent(phandle), or kNone.
CollectiveAttribution AttributeNetEvent(void* phandle);

}  // namespace ff::sla
