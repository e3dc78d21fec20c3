// The one time source seam: the real monotonic clock, or a fake one tests advance by hand.
#pragma once

#include <chrono>

namespace ff {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::nanoseconds Now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
  }
};

}  // namespace ff
