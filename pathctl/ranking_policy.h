// SLA levels and the knobs of SLA-aware path ranking (defaults are the article's constants).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ff::pathctl {

// Level 1: single hop or NVLink only. Level 2: may cross leaves/ToRs and spines but not the
// top (core) tier. Level 3: any path.
enum class SlaLevel : int { kLevel1 = 1, kLevel2 = 2, kLevel3 = 3 };

struct Policy {
  size_t k = 5;        // candidates ranked per source/destination (the article's k)
  size_t backups = 2;  // backup paths kept per entry, most disjoint first

  // Penalty per link: max(0, latency - fraction*sla) * weight  (only when an SLA is set).
  double latency_penalty_sla_fraction = 0.8;
  double latency_penalty_weight = 1000.0;
  // Penalty per link when free buffer < threshold: scale * exp((threshold - buffer) / decay).
  double buffer_penalty_threshold_bytes = 1.5 * 1024 * 1024;
  double buffer_penalty_scale = 10000.0;
  double buffer_penalty_decay_bytes = 100.0 * 1024;

  // Constraints a path must meet to satisfy the SLA.
  double max_hop_latency_us = 85.0;
  double min_free_buffer_bytes = 2.0 * 1024 * 1024;
  double bandwidth_headroom = 1.2;       // path Gb/s >= headroom * size / (timeout - overhead)
  double transfer_timeout_us = 10000.0;  // deadline for one message
  double timeout_overhead_us = 300.0;

  // SLA thresholds: sla < level1 -> Level 1; sla <= level2 -> Level 2; else (or none) Level 3.
  double level1_below_sla_us = 50.0;
  double level2_max_sla_us = 100.0;

  // Degraded links stay usable as a last resort: this is added to their search cost and score.
  double degraded_link_cost = 1e6;

  // topo_distance: added to the score of a path by the PCIe distance between the GPU and the local
  // NIC the path leaves from, indexed in pcie::PciDistance's order (PIX, PXB, PHB, NODE, SYS). Of
  // equal fabric paths the nearest NIC wins; a NIC across the socket interconnect wins only with a
  // fabric path better by more than the difference. Rough PCIe/interconnect latencies; a ranking
  // weight, not an SLA constraint (the latency verdicts judge the fabric alone).
  double topo_distance_cost_us[5] = {0.0, 0.5, 1.0, 2.0, 4.0};
};

// sla_us <= 0 means no SLA (Level 3).
inline SlaLevel LevelForSla(double sla_us, const Policy& p) {
  if (sla_us <= 0) return SlaLevel::kLevel3;
  if (sla_us < p.level1_below_sla_us) return SlaLevel::kLevel1;
  if (sla_us <= p.level2_max_sla_us) return SlaLevel::kLevel2;
  return SlaLevel::kLevel3;
}

}  // namespace ff::pathctl
