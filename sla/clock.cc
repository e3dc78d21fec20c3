// The steady clock behind the SLA component's Clock seam.
#include "sla/clock.h"

#include <chrono>

namespace ff::sla {

uint64_t SteadyClock::NowNs() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const SteadyClock& SteadyClock::Instance() {
  // Never destroyed: NCCL's proxy thread may still read the clock (heat index, statistics) while
  // static destructors run at exit.
  static const SteadyClock* clock = new SteadyClock;
  return *clock;
}

}  // namespace ff::sla
