// Time source seam: the real monotonic clock, or a fake one tests advance by hand.
#pragma once

#include <atomic>
#include <cstdint>

namespace ff::sla {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t NowNs() const = 0;  // monotonic nanoseconds
};

// CLOCK_MONOTONIC via std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  uint64_t NowNs() const override;
  static const SteadyClock& Instance();
};

// A clock that moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(uint64_t start_ns = 0) : now_(start_ns) {}
  uint64_t NowNs() const override { return now_.load(std::memory_order_relaxed); }
  void Advance(uint64_t ns) { now_.fetch_add(ns, std::memory_order_relaxed); }
  void Set(uint64_t ns) { now_.store(ns, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> now_;
};

}  // namespace ff::sla
