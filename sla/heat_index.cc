#include "sla/heat_index.h"

#include <algorithm>

namespace ff::sla {

std::string HeatConfig::Validate() const {
  if (bucket_ns == 0) return "the heat bucket length must be above 0";
  if (buckets == 0 || buckets > HeatIndex::kMaxBuckets)
    return "the heat window must have 1 to " + std::to_string(HeatIndex::kMaxBuckets) + " buckets";
  if (no_sla_us == 0) return "the SLA assumed without a declaration must be above 0";
  return {};
}

HeatIndex::HeatIndex(std::optional<uint64_t> sla_ns, const Clock& clock, const HeatConfig& config)
    : clock_(clock), config_(config) {
  if (!config_.Validate().empty()) config_ = HeatConfig{};
  sla_us_ = sla_ns ? static_cast<double>(*sla_ns) / 1e3 : static_cast<double>(config_.no_sla_us);
}

void HeatIndex::Add(uint64_t bytes) { Add(bytes, clock_.NowNs()); }

void HeatIndex::Add(uint64_t bytes, uint64_t now_ns) {
  const uint64_t epoch = (now_ns / config_.bucket_ns) & kEpochMask;
  auto& bucket = buckets_[epoch % config_.buckets];
  uint64_t old = bucket.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t count = (old >> kBytesBits) == epoch ? (old & kBytesMask) : 0;  // stale bucket restarts
    count = std::min(count + bytes, kBytesMask);                            // saturate, never wrap
    const uint64_t next = (epoch << kBytesBits) | count;
    if (bucket.compare_exchange_weak(old, next, std::memory_order_relaxed)) return;
  }
}

uint64_t HeatIndex::WindowBytes() const {
  const uint64_t now_epoch = (clock_.NowNs() / config_.bucket_ns) & kEpochMask;
  uint64_t total = 0;
  for (uint32_t i = 0; i < config_.buckets; ++i) {
    const uint64_t v = buckets_[i].load(std::memory_order_relaxed);
    const uint64_t age = (now_epoch - (v >> kBytesBits)) & kEpochMask;  // modular: epochs wrap after 2^24
    if (age < config_.buckets) total += v & kBytesMask;
  }
  return total;
}

double HeatIndex::WindowMegabytesPerSecond() const {
  const double window_s = static_cast<double>(config_.bucket_ns) * config_.buckets / 1e9;
  return static_cast<double>(WindowBytes()) / 1e6 / window_s;
}

double HeatIndex::Heat() const { return HeatOf(WindowMegabytesPerSecond(), sla_us_); }

double HeatIndex::HeatOf(double mb_per_s, double sla_us) { return mb_per_s * 1000.0 / (sla_us * 10.0); }

}  // namespace ff::sla
