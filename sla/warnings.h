// Collects configuration diagnostics once per variable, for the plugin to log through NCCL's logger.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ff::sla {

// A bad value is reported once per variable: parsing runs at every communicator init,
// and a job with hundreds of communicators must not print the same line hundreds of times.
class Warnings {
 public:
  // Records `message` about `variable` unless that variable was already reported.
  void Report(const std::string& variable, std::string message);

  // Hands every message not yet drained to `sink` (e.g. the NCCL logger), oldest first.
  void Drain(const std::function<void(const std::string&)>& sink);

  // Every message reported so far, drained or not (for tests and `flexiforce config`).
  std::vector<std::string> All() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> seen_variables_;
  std::vector<std::string> messages_;
  size_t drained_ = 0;
};

}  // namespace ff::sla
