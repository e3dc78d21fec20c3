#include "sla/warnings.h"

namespace ff::sla {

void Warnings::Report(const std::string& variable, std::string message) {
  std::lock_guard lock(mu_);
  if (!seen_variables_.insert(variable).second) return;
  messages_.push_back(std::move(message));
}

void Warnings::Drain(const std::function<void(const std::string&)>& sink) {
  std::vector<std::string> pending;
  {
    std::lock_guard lock(mu_);
    pending.assign(messages_.begin() + static_cast<std::ptrdiff_t>(drained_), messages_.end());
    drained_ = messages_.size();
  }
  for (const auto& m : pending) sink(m);
}

std::vector<std::string> Warnings::All() const {
  std::lock_guard lock(mu_);
  return messages_;
}

}  // namespace ff::sla
