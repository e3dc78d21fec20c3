// Task identity and SLA from the environment, logged once at init.
#include "core/task_profile.h"

#include <time.h>

#include "base/logging.h"
#include "sla/env_lookup.h"

namespace ff {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void TaskProfile::AddBytes(uint64_t bytes, uint64_t now_ns) {
  heat->Add(bytes, now_ns);
  uint64_t last = heat_published_ns.load(std::memory_order_relaxed);
  if (now_ns - last < 100'000'000ull || !stats || stats_task == sla::StatsTable::kInvalid) return;
  if (heat_published_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed))
    stats->SetTaskHeat(stats_task, heat->Heat());
}

void TaskProfile::PublishHeat() {
  if (stats && stats_task != sla::StatsTable::kInvalid) stats->SetTaskHeat(stats_task, heat->Heat());
}

std::unique_ptr<TaskProfile> TaskProfile::Load(bool stats_enabled, bool stats_keep, const std::string& stats_dir,
                                               uint32_t stats_slots) {
  auto p = std::make_unique<TaskProfile>();
  sla::Warnings warnings;
  p->decl = sla::ReadSlaDeclaration(sla::ProcessEnv(), warnings);
  warnings.Drain([](const std::string& m) { FF_WARN("%s", m.c_str()); });
  uint64_t h = 1469598103934665603ull;
  for (char c : p->decl.task.id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  p->task_hash = h;
  p->sla_us = p->decl.latency_ns ? static_cast<uint32_t>((*p->decl.latency_ns + 999) / 1000) : 0;
  p->level = sla::ClassifySla(p->decl.latency_ns);
  p->steer = p->decl.steer;
  p->heat = std::make_unique<sla::HeatIndex>(p->decl.latency_ns);
  if (stats_enabled) {
    sla::StatsTableOptions o;
    o.dir = stats_dir;
    o.remove_on_close = !stats_keep;
    o.slots = stats_slots;
    std::string err;
    p->stats = sla::StatsTable::Open(o, &err);
    if (!p->stats) {
      FF_WARN("statistics disabled: %s", err.c_str());
    } else {
      p->stats_task = p->stats->ResolveTask(p->decl.task.id);
      if (p->stats_task != sla::StatsTable::kInvalid)
        p->stats->SetTaskSla(p->stats_task, p->decl.latency_ns, static_cast<int>(p->level));
    }
  }
  FF_INFO(NCCL_INIT | NCCL_NET, "task %s (from %s), SLA %s, %s, mode %s", p->decl.task.id.c_str(),
          p->decl.task.source.c_str(), p->sla_us ? (std::to_string(p->sla_us) + " us").c_str() : "none",
          sla::SlaLevelName(p->level), p->steer ? "steer (AI_FLEXIFORCE_ENABLE=1)" : "observe only");
  return p;
}

}  // namespace ff
