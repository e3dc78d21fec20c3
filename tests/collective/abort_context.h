// Where a rank is and how long it may wait: the global deadline and the text used in error messages.
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

namespace ff::collective {

// Thrown for every failure a rank reports (plugin error, timeout, dead peer, bad input).
class DriverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One per rank. Every wait loop calls Check() so that no wait outlives the global
// --timeout-s and a peer that died (seen through the rendezvous socket) ends the wait.
class AbortContext {
 public:
  using Clock = std::chrono::steady_clock;

  AbortContext(int rank, double timeout_s)
      : rank_(rank), timeout_s_(timeout_s),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))) {}

  int Rank() const { return rank_; }
  double TimeoutSeconds() const { return timeout_s_; }
  Clock::time_point Deadline() const { return deadline_; }

  // Text naming the current phase, e.g. "allreduce 1048576 B iteration 3".
  void SetPhase(std::string phase) { phase_ = std::move(phase); }
  const std::string& Phase() const { return phase_; }

  // Called periodically from wait loops to learn whether a peer went away; throws if so.
  void SetLivenessProbe(std::function<void()> probe) { probe_ = std::move(probe); }

  // Throws DriverError when the deadline passed or a peer is gone; `where` refines the phase.
  void Check(const std::string& where) {
    auto now = Clock::now();
    if (now >= deadline_) {
      throw DriverError(Prefix() + "global timeout of " + std::to_string(static_cast<int>(timeout_s_)) +
                        " s exceeded during " + phase_ + (where.empty() ? "" : " (" + where + ")"));
    }
    if (probe_ && now - last_probe_ >= std::chrono::milliseconds(5)) {
      last_probe_ = now;
      probe_();
    }
  }

  std::string Prefix() const { return "rank " + std::to_string(rank_) + ": "; }

 private:
  int rank_;
  double timeout_s_;
  Clock::time_point deadline_;
  Clock::time_point last_probe_{};
  std::string phase_ = "startup";
  std::function<void()> probe_;
};

}  // namespace ff::collective
