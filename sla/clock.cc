#include "sla/clock.h"

#include <chrono>

namespace ff::sla {

uint64_t SteadyClock::NowNs() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const SteadyClock& SteadyClock::Instance() {
  static const SteadyClock clock;
  return clock;
}

}  // namespace ff::sla
