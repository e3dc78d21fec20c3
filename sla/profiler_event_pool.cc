#include "sla/profiler_event_pool.h"

#include <cstring>
#include <mutex>

#include "nccl/profiler_abi.h"

namespace ff::sla {

struct ProfilerEventPool::Event {
  std::atomic<int32_t> refs{0};  // 0: free
  std::atomic<uint32_t> next_free{0};
  uint64_t type = 0;
  Event* parent = nullptr;  // a referenced event of this pool, or null
  Collective collective = Collective::kUnknown;
  const char* datatype = nullptr;  // NCCL's static strings: safe to keep
  const char* algo = nullptr;
  uint64_t seq_number = 0;
  uint64_t count = 0;
  int peer = -1;
};

namespace {
constexpr uint64_t kTracked =
    ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin;
constexpr uint64_t kTaskLevel = ncclProfileColl | ncclProfileP2p;
// NetPlugin -> ProxyStep -> ProxyOp -> Coll/P2p is 3 links; the bound guards against corrupt chains.
constexpr int kMaxWalk = 8;
}  // namespace

ProfilerEventPool::ProfilerEventPool(uint32_t capacity, uint32_t linger)
    : capacity_(capacity == 0 ? 1 : capacity),
      linger_size_(linger),
      events_(new Event[capacity_]),
      linger_(new std::atomic<Event*>[linger == 0 ? 1 : linger]) {
  for (uint32_t i = 0; i < capacity_; ++i) events_[i].next_free.store(i + 1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < (linger == 0 ? 1 : linger); ++i) linger_[i].store(nullptr, std::memory_order_relaxed);
  free_head_.store(0, std::memory_order_release);  // index 0, tag 0; the last slot points to capacity_ (empty)
}

ProfilerEventPool::~ProfilerEventPool() = default;

bool ProfilerEventPool::Owns(const void* handle) const { return AsEvent(handle) != nullptr; }

ProfilerEventPool::Event* ProfilerEventPool::AsEvent(const void* handle) const {
  const auto p = reinterpret_cast<uintptr_t>(handle);
  const auto base = reinterpret_cast<uintptr_t>(events_.get());
  if (p < base || p >= base + uintptr_t{capacity_} * sizeof(Event)) return nullptr;
  if ((p - base) % sizeof(Event) != 0) return nullptr;
  return &events_[(p - base) / sizeof(Event)];
}

ProfilerEventPool::Event* ProfilerEventPool::Allocate() {
  uint64_t head = free_head_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t index = static_cast<uint32_t>(head);
    if (index >= capacity_) return nullptr;
    const uint32_t next = events_[index].next_free.load(std::memory_order_relaxed);
    const uint64_t tagged = ((head >> 32) + 1) << 32 | next;
    if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_acq_rel)) return &events_[index];
  }
}

bool ProfilerEventPool::TryRef(Event* e) const {
  int32_t refs = e->refs.load(std::memory_order_acquire);
  while (refs > 0) {
    if (e->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void ProfilerEventPool::Unref(Event* e) const {
  // Iterative, since releasing the last child may release its parent, and so on up the chain.
  while (e != nullptr && e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Event* parent = e->parent;
    e->parent = nullptr;
    e->type = 0;
    const auto index = static_cast<uint32_t>(e - events_.get());
    uint64_t head = free_head_.load(std::memory_order_acquire);
    for (;;) {
      e->next_free.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
      const uint64_t tagged = ((head >> 32) + 1) << 32 | index;
      if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_acq_rel)) break;
    }
    live_.fetch_sub(1, std::memory_order_relaxed);
    e = parent;
  }
}

void* ProfilerEventPool::Start(const ProfilerEventInfo& info) {
  if ((info.type & kTracked) == 0) return nullptr;
  Event* e = Allocate();
  if (e == nullptr) {
    exhausted_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  Event* parent = AsEvent(info.parent);
  e->parent = (parent != nullptr && TryRef(parent)) ? parent : nullptr;
  e->type = info.type;
  e->collective = info.func ? CollectiveFromName(info.func) : Collective::kUnknown;
  e->datatype = info.datatype;
  e->algo = info.algo;
  e->seq_number = info.seq_number;
  e->count = info.count;
  e->peer = info.peer;
  live_.fetch_add(1, std::memory_order_relaxed);
  e->refs.store(1, std::memory_order_release);
  return e;
}

void ProfilerEventPool::Stop(void* handle) {
  Event* e = AsEvent(handle);
  if (e == nullptr || e->refs.load(std::memory_order_acquire) <= 0) return;
  if ((e->type & kTaskLevel) != 0 && linger_size_ > 0) {
    // The ring takes over the event's own reference and drops the oldest one it held.
    const uint64_t slot = linger_next_.fetch_add(1, std::memory_order_relaxed) % linger_size_;
    Unref(linger_[slot].exchange(e, std::memory_order_acq_rel));
    return;
  }
  Unref(e);
}

CollectiveAttribution ProfilerEventPool::Attribute(void* handle) const {
  Event* e = AsEvent(handle);
  if (e == nullptr || !TryRef(e)) return {};
  CollectiveAttribution a;
  const Event* cur = e;
  for (int depth = 0; cur != nullptr && depth < kMaxWalk; ++depth, cur = cur->parent) {
    if ((cur->type & kTaskLevel) == 0) continue;
    a.collective = cur->collective;
    a.seq_number = cur->seq_number;
    a.count = cur->count;
    a.datatype = cur->datatype;
    a.algorithm = cur->algo;
    a.peer = cur->peer;
    a.source = CollectiveAttribution::Source::kProfiler;
    break;
  }
  Unref(e);
  return a;
}

CollectiveAttribution ProfilerEventPool::AttributeNetEvent(void* phandle) const {
  if (phandle == nullptr) return {};
  // NCCL before 2.27 passed the ProxyStep handle itself; 2.27+ a record that starts with it.
  if (Owns(phandle)) return Attribute(phandle);
  void* step = nullptr;
  std::memcpy(&step, phandle, sizeof(step));
  return Attribute(step);
}

namespace {
std::atomic<ProfilerEventPool*> g_pool{nullptr};
std::once_flag g_pool_once;
}  // namespace

ProfilerEventPool* GlobalProfilerPool() { return g_pool.load(std::memory_order_acquire); }

ProfilerEventPool& EnsureGlobalProfilerPool() {
  // Never freed: NCCL may call the profiler from its threads during process exit.
  std::call_once(g_pool_once, [] { g_pool.store(new ProfilerEventPool(), std::memory_order_release); });
  return *g_pool.load(std::memory_order_acquire);
}

CollectiveAttribution AttributeNetEvent(void* phandle) {
  ProfilerEventPool* pool = GlobalProfilerPool();
  return pool != nullptr ? pool->AttributeNetEvent(phandle) : CollectiveAttribution{};
}

}  // namespace ff::sla
