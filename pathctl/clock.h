// Time source seam, so debounce and recovery timing are tested with a fake clock, not sleeps.
#pragma once

#include <chrono>

namespace ff::pathctl {

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

}  // namespace ff::pathctl
