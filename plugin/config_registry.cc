// Knob table and parsing; every FLEXIFORCE_* variable is declared here and nowhere else.
#include "plugin/config_registry.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/logging.h"
#include "sla/sla_declaration.h"
#include "sla/sla_level.h"
#include "sla/traffic_class.h"
#include "sla/warnings.h"

namespace ff {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;

const std::vector<KnobSpec> kSpecs = {
    {"FLEXIFORCE_PATHS", KnobType::kInt, "2", 1, 16,
     "paths (TCP connections) per communicator; large messages are striped over them and a failed path's "
     "traffic moves to the others"},
    {"FLEXIFORCE_CHUNK_SIZE", KnobType::kBytes, "512K", 4 * kKiB, 64 * kMiB,
     "bytes per striped chunk (suffixes K, M, G)"},
    {"FLEXIFORCE_STRIPE_MIN", KnobType::kBytes, "256K", 0, 1 * kGiB,
     "messages smaller than this travel on one path instead of being striped"},
    {"FLEXIFORCE_SPREAD_NICS", KnobType::kBool, "1", 0, 1,
     "spread a communicator's paths over every selected local and remote interface (1) or keep them on "
     "the device's own interface (0); over verbs: QP i on NCCL's port or the next ones by index, cyclically, "
     "at most 4 ports (1), or every QP on NCCL's port (0)"},
    {"FLEXIFORCE_SOCKET_BUFFER", KnobType::kBytes, "0", 64 * kKiB, 1 * kGiB,
     "SO_SNDBUF/SO_RCVBUF per path; 0 keeps the kernel's autotuning (smaller buffers than 64K stalled "
     "a connection for good: a receive window below one segment of a 64 KiB-MTU link)",
     nullptr, true},
    {"FLEXIFORCE_TCP_CONGESTION", KnobType::kString, "", 0, 15,
     "TCP congestion control of every path (TCP_CONGESTION: cubic, bbr, dctcp, reno, ...); empty keeps the "
     "system's net.ipv4.tcp_congestion_control. An algorithm the kernel refuses (not built, or not in "
     "net.ipv4.tcp_allowed_congestion_control for an unprivileged job) is reported once and the default kept",
     nullptr, false, true},
    {"FLEXIFORCE_CONNECT_TIMEOUT_MS", KnobType::kInt, "30000", 100, 3600000,
     "how long connect/accept keep trying before reporting an error"},
    {"FLEXIFORCE_PEER_TIMEOUT_MS", KnobType::kInt, "10000", 100, 3600000,
     "a path whose peer stops acknowledging for this long is declared dead (TCP_USER_TIMEOUT); bounds the "
     "time to report a silently dead peer"},
    {"FLEXIFORCE_PATH_STALL_MS", KnobType::kInt, "100", 0, 3600000,
     "a path with bytes in flight that receives no TCP acknowledgement at all for this long is declared "
     "dead and its unacknowledged chunks are re-sent on the other paths (0: off; never applied to the "
     "last path, which FLEXIFORCE_PEER_TIMEOUT_MS bounds)"},
    {"FLEXIFORCE_LINK_EVENTS", KnobType::kBool, "1", 0, 1,
     "watch rtnetlink carrier events and fail over a path the moment its local interface loses carrier"},
    {"FLEXIFORCE_PATH_STALL_FAST_MS", KnobType::kInt, "10", 0, 60000,
     "a path silent this long (or 8 round trips, or TCP's tail-loss probe time - 4 round trips and 5 kernel "
     "ticks, 20 ms at CONFIG_HZ=250 - if longer) while another path of the same connection is "
     "acknowledged has its unacknowledged data re-sent elsewhere and is drained, kept open until it answers "
     "or the absolute rule declares it dead (a cut behind a switch that no carrier event reports); paths "
     "recovering a loss are exempt; 0 = off"},
    {"FLEXIFORCE_PATH_LOSS_PPM", KnobType::kInt, "5000", 1, 1000000,
     "soft rule: a path that lost this many of every million segments it sent (retransmissions the peer "
     "did not report as duplicates) over 500 ms - at least 20,000 segments, loss in at least 6 of the "
     "ten 50 ms windows, and at least twice the best other path's loss plus half this - is drained "
     "(nothing re-sent). 5000 = 0.5%: a healthy path's span lost 0.04% at most (60 s of fault-free "
     "collectives, idle and with two busy loops), a link with 1% loss shows 1.2-1.5% in nearly every window"},
    {"FLEXIFORCE_RESEND_TIMEOUT_MS", KnobType::kInt, "250", 0, 3600000,
     "when the peer's kernel holds every byte sent but no acknowledgement came for this long, ask for it, and "
     "re-send the unacknowledged messages once the receiver answers without them (it drops duplicates); "
     "bounds any loss a failover missed; 0 = off"},
    {"FLEXIFORCE_FAILBACK_MS", KnobType::kInt, "2000", 0, 3600000,
     "a failed path reconnects once its interface has had carrier this long (a silent failure: tries after "
     "this long, backing off while it fails) and then carries traffic again; 0 = never fail back"},
    {"FLEXIFORCE_EAGER_BYTES", KnobType::kBytes, "64K", 0, 4 * kMiB,
     "sends up to this size complete once copied into the connection's retransmit ring and handed to "
     "the transport, without waiting for the receiver's acknowledgement (re-sent from the ring after a "
     "failover); 0 = every send completes on its acknowledgement"},
    {"FLEXIFORCE_EAGER_RING", KnobType::kBytes, "2M", 0, 1 * kGiB,
     "bytes of the per-connection retransmit ring that holds eager sends until acknowledged; a send that "
     "does not fit waits for its acknowledgement instead"},
    {"FLEXIFORCE_COALESCE_US", KnobType::kInt, "4", 0, 1000,
     "sends posted within this long of the connection's last write, while an older send is untested, wait "
     "to leave together in one write (at most 16; 128 KiB of eager sends, 4 MiB with larger ones; never "
     "past the caller's next test of a send); 0 = every send is written at once"},
    {"FLEXIFORCE_ACK_BATCH", KnobType::kInt, "16", 1, 1024,
     "the receiver acknowledges eager messages at most once per this many (or FLEXIFORCE_ACK_DELAY_US); "
     "messages whose sender waits are acknowledged once per 4 while receives are posted behind them, at "
     "once when none is"},
    {"FLEXIFORCE_ACK_DELAY_US", KnobType::kInt, "1000", 0, 1000000,
     "longest time the receiver holds a batched acknowledgement of eager messages, or descriptors of "
     "posted buffers of 8 KiB or less in all; other descriptors, and an acknowledgement its sender waits "
     "on (held only while receives are posted behind it), wait at most 100 us"},
    {"FLEXIFORCE_DUAL_PATH_MS", KnobType::kInt, "0", 0, 600000,
     "dual-path canary: before traffic leaves a degraded path, or returns to a reconnected one, both keep "
     "carrying for this long and are compared (retransmissions, round-trip time); the move happens only "
     "if the new path is no worse; 0 = move at once"},
    {"FLEXIFORCE_NIC_HEALTH", KnobType::kBool, "1", 0, 1,
     "read NIC error, FEC, RDMA and PCIe link counters (sysfs, ethtool netlink) and drain paths whose "
     "local NIC degrades (debounced: 3 detections within 500 ms)"},
    {"FLEXIFORCE_SYSFS_ROOT", KnobType::kString, "", 0, 0,
     "prefix for /sys when reading NIC health counters and discovering RDMA ports (tests point it at a fixture "
     "tree)"},
    {"FLEXIFORCE_QUEUED_CHUNKS", KnobType::kInt, "2", 1, 64,
     "chunks queued per path ahead of the socket (small unstriped messages: up to 128 KiB of them); more "
     "hides latency, fewer balances paths better"},
    {"FLEXIFORCE_TRAFFIC_CLASS", KnobType::kInt, "-1", -1, 255,
     "IP TOS byte for every path (-1: derive from the SLA level when steering, else leave unset); "
     "a communicator's ncclConfig trafficClass wins over this"},
    {"FLEXIFORCE_LEVEL3_CAP_PCT", KnobType::kInt, "80", 1, 100,
     "when steering, Level-3 connections (no SLA or SLA > 100 us) are paced to this percent of the link rate "
     "(SO_MAX_PACING_RATE, split evenly over the connection's paths); 100 turns pacing off"},
    {"FLEXIFORCE_LINK_SPEED_MBPS", KnobType::kInt, "0", 0, 10000000,
     "link rate in Mbit/s that the Level-3 cap is a fraction of; 0 uses the device's sysfs speed (for virtual "
     "NICs, whose reported speed means nothing, set it)"},
    {"FLEXIFORCE_STATS", KnobType::kBool, "1", 0, 1,
     "keep per-task, per-collective statistics in shared memory for `flexiforce stats` (1) or not (0)"},
    {"FLEXIFORCE_STATS_KEEP", KnobType::kBool, "0", 0, 1,
     "keep the statistics file after a clean exit (1) so `flexiforce stats --include-stale` can read a finished "
     "job; 0 removes it"},
    {"FLEXIFORCE_STATS_KEEP_CRASHED", KnobType::kInt, "8", 0, 1048576,
     "statistics files of killed or crashed processes to keep in FLEXIFORCE_STATS_DIR: each process, at its "
     "first statistics file, removes older ones beyond this many (newest kept; files a clean exit kept with "
     "FLEXIFORCE_STATS_KEEP=1 stay, `flexiforce stats --gc` removes every leftover)"},
    {"FLEXIFORCE_STATS_DIR", KnobType::kString, "/dev/shm", 0, 0,
     "directory of the statistics file flexiforce-stats-<pid>"},
    {"FLEXIFORCE_STATS_SLOTS", KnobType::kInt, "1024", 1, 1048576,
     "slots of the statistics table, one per {task, collective, peer address, path} (960 bytes each); a slot "
     "no open connection uses is reclaimed for a new key, its counts kept in the task's closed connections"},
    {"FLEXIFORCE_TOPOLOGY", KnobType::kString, "", 0, 0,
     "fabric topology JSON for the path oracle; empty: derive a graph from the interfaces"},
    {"FLEXIFORCE_TRANSPORT", KnobType::kChoice, "auto", 0, 0,
     "the transport: auto = RDMA verbs when libibverbs loads and an ACTIVE port passes NCCL_IB_HCA, else TCP; "
     "verbs = RDMA only (init fails, naming the reason, when there is none); tcp = TCP only. The choice is logged "
     "once at init",
     "auto|verbs|tcp"},
    {"FLEXIFORCE_IBVERBS_LIBRARY", KnobType::kString, "", 0, 0,
     "the verbs library the plugin opens with dlopen (empty: libibverbs.so.1); tests point it at a fake"},
    {"NCCL_IB_HCA", KnobType::kString, "", 0, 0,
     "NCCL's RDMA device selection (verbs transport): mlx5_0:1,mlx5_1 - prefixes, '^' excludes, '=' matches "
     "exactly, ':N' picks a port"},
    {"NCCL_IB_TIMEOUT", KnobType::kInt, "14", 1, 31,
     "verbs: the RC QP's local ACK timeout, 4.096 us x 2^N per try (NCCL's name and meaning; NCCL's default is 20). "
     "14 = 67 ms: above a busy host's round trip, and with NCCL_IB_RETRY_CNT=3 the QP gives up after 268 ms, "
     "after FLEXIFORCE_PATH_STALL_MS has failed the path over and well before FLEXIFORCE_PEER_TIMEOUT_MS"},
    {"NCCL_IB_RETRY_CNT", KnobType::kInt, "3", 0, 7,
     "verbs: how often the RC QP retransmits before its work requests fail with a retry error (NCCL's name; "
     "NCCL's default is 7)"},
    {"NCCL_IB_SL", KnobType::kInt, "-1", -1, 15,
     "verbs: InfiniBand service level of every QP when the SLA policy sets none (observe only, or an explicit "
     "traffic class); -1: 0. When steering, the SLA level's SL wins"},
    {"NCCL_IB_TC", KnobType::kInt, "-1", -1, 255,
     "verbs: GRH traffic class byte (DSCP << 2 | ECN) of every QP when the policy sets none; -1: 0. A "
     "communicator's ncclConfig trafficClass, FLEXIFORCE_TRAFFIC_CLASS and, when steering, the SLA level win"},
    {"FLEXIFORCE_IB_MTU", KnobType::kChoice, "4096", 0, 0,
     "verbs: cap on the path MTU in bytes; a QP uses the smaller of the two ports' active MTUs under this cap "
     "(lower it for a fabric whose switches carry less)",
     "256|512|1024|2048|4096"},
    {"NCCL_SOCKET_IFNAME", KnobType::kString, "", 0, 0,
     "NCCL's interface selection: comma-separated prefixes, '^' excludes, '=' matches exactly"},
    {"NCCL_SOCKET_FAMILY", KnobType::kString, "", 0, 0, "AF_INET or AF_INET6 to restrict the address family"},
};

const std::vector<JobVariableSpec> kJobSpecs = {
    {sla::kEnvSlaLatency, "unset: no SLA, Level 3",
     "a positive number of microseconds up to 10 s, optionally with a unit ns, us, ms or s (50, 50us, 0.05ms, "
     "50000ns)",
     "the job's latency SLA; it sets the SLA level: Level 1 below 50 us (single-hop paths only), Level 2 from 50 "
     "to 100 us (paths may cross leaves, not the top tier), Level 3 above 100 us or unset (any path, paced to "
     "FLEXIFORCE_LEVEL3_CAP_PCT when steering)"},
    {sla::kEnvTaskId, "a launcher's job id, else a per-process id derived from host, pid and start time",
     "1 to 63 printable characters without spaces (e.g. llama-7b-run3)",
     "the task (job) id every message is tagged with and statistics are kept under; falls back to "
     "TORCHELASTIC_RUN_ID (not torchrun's placeholder 'none'), SLURM_JOB_ID, OMPI_MCA_orte_ess_jobid, "
     "PMIX_NAMESPACE, then the derived id (different on every rank)"},
    {sla::kEnvEnable, "unset: observe only", "1, true, on or yes to steer; 0, false, off, no or empty to observe",
     "1: steer (the oracle chooses paths and source-port entropy, the SLA level sets the traffic class and "
     "Level-3 pacing); 0 or unset: observe only (carry, tag and measure, change no traffic class or path "
     "choice; failover over the connection's paths still works)"},
};

std::string FormatLatency(uint64_t ns) {
  char buf[64];
  if (ns % 1000 == 0) {
    std::snprintf(buf, sizeof(buf), "%llu us", static_cast<unsigned long long>(ns / 1000));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu ns", static_cast<unsigned long long>(ns));
  }
  return buf;
}

const char* LevelWords(sla::SlaLevel level) {
  switch (level) {
    case sla::SlaLevel::kLevel1:
      return "Level 1";
    case sla::SlaLevel::kLevel2:
      return "Level 2";
    case sla::SlaLevel::kLevel3:
      break;
  }
  return "Level 3";
}

bool ParseBytes(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || v < 0) return false;
  int64_t mult = 1;
  std::string suffix(end);
  if (suffix == "" || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    mult = kKiB;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    mult = kMiB;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    mult = kGiB;
  } else {
    return false;
  }
  if (v > INT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

}  // namespace

const std::vector<KnobSpec>& ConfigRegistry::Specs() { return kSpecs; }

std::string ConfigRegistry::ChoiceWords(const KnobSpec& spec) {
  std::vector<std::string> w;
  const std::string words = spec.choices ? spec.choices : "";
  for (size_t at = 0; at < words.size();) {
    size_t bar = words.find('|', at);
    if (bar == std::string::npos) bar = words.size();
    w.push_back(words.substr(at, bar - at));
    at = bar + 1;
  }
  std::string out;
  for (size_t i = 0; i < w.size(); ++i) out += (i == 0 ? "" : i + 1 == w.size() ? " or " : ", ") + w[i];
  return out;
}

bool ConfigRegistry::ParseValue(const KnobSpec& spec, const std::string& text, int64_t* number,
                                std::string* error) {
  switch (spec.type) {
    case KnobType::kString:
      *number = 0;
      if (spec.identifier) {
        bool ok = text.size() <= static_cast<size_t>(spec.max);
        for (char ch : text) ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
        if (!ok) {
          *error = std::string(spec.name) + "='" + text + "' is not valid; accepted: a name of 1 to " +
                   std::to_string(spec.max) + " lowercase letters, digits and '_' (e.g. cubic), or empty";
          return false;
        }
      }
      return true;
    case KnobType::kChoice: {
      const std::string words = spec.choices ? spec.choices : "";
      int64_t index = 0;
      for (size_t at = 0; at <= words.size(); ++index) {
        size_t bar = words.find('|', at);
        if (bar == std::string::npos) bar = words.size();
        if (words.compare(at, bar - at, text) == 0 && bar > at) {
          *number = index;
          return true;
        }
        at = bar + 1;
      }
      *error = std::string(spec.name) + "='" + text + "' is not valid; accepted: " + ChoiceWords(spec);
      return false;
    }
    case KnobType::kBool:
      if (text == "0" || text == "1") {
        *number = text == "1";
        return true;
      }
      *error = std::string(spec.name) + "='" + text + "' is not valid; accepted: 0 or 1";
      return false;
    case KnobType::kInt: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno != 0 || end == text.c_str() || *end != '\0' || v < spec.min || v > spec.max) {
        *error = std::string(spec.name) + "='" + text + "' is not valid; accepted: an integer from " +
                 std::to_string(spec.min) + " to " + std::to_string(spec.max);
        return false;
      }
      *number = v;
      return true;
    }
    case KnobType::kBytes: {
      int64_t v = 0;
      if (!ParseBytes(text, &v) || ((v < spec.min || v > spec.max) && !(spec.zero_means_off && v == 0))) {
        *error = std::string(spec.name) + "='" + text + "' is not valid; accepted: " +
                 (spec.zero_means_off ? "0, or " : "") + "bytes from " + std::to_string(spec.min) + " to " +
                 std::to_string(spec.max) + ", optionally with a K, M or G suffix";
        return false;
      }
      *number = v;
      return true;
    }
  }
  return false;
}

std::vector<KnobValue> ConfigRegistry::Resolve(const EnvLookup& env) {
  std::vector<KnobValue> out;
  out.reserve(kSpecs.size());
  for (const auto& spec : kSpecs) {
    KnobValue v{&spec, spec.default_value};
    std::string err;
    ParseValue(spec, spec.default_value, &v.number, &err);
    const char* raw = env(spec.name);
    if (raw != nullptr && raw[0] != '\0') {
      int64_t n = 0;
      if (ParseValue(spec, raw, &n, &err)) {
        v.text = raw;
        v.number = n;
        v.from_env = true;
      } else {
        v.error = err + "; using the default " + (spec.default_value[0] ? spec.default_value : "(empty)");
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

Config ConfigRegistry::ToConfig(const std::vector<KnobValue>& values) {
  auto num = [&](const char* name) -> int64_t {
    for (const auto& v : values)
      if (!std::strcmp(v.spec->name, name)) return v.number;
    return 0;
  };
  auto str = [&](const char* name) -> std::string {
    for (const auto& v : values)
      if (!std::strcmp(v.spec->name, name)) return v.text;
    return {};
  };
  Config c;
  c.paths_per_connection = static_cast<int>(num("FLEXIFORCE_PATHS"));
  c.chunk_bytes = num("FLEXIFORCE_CHUNK_SIZE");
  c.stripe_min_bytes = num("FLEXIFORCE_STRIPE_MIN");
  c.spread_nics = num("FLEXIFORCE_SPREAD_NICS") != 0;
  c.socket_buffer_bytes = num("FLEXIFORCE_SOCKET_BUFFER");
  c.tcp_congestion = str("FLEXIFORCE_TCP_CONGESTION");
  c.connect_timeout_ms = static_cast<int>(num("FLEXIFORCE_CONNECT_TIMEOUT_MS"));
  c.peer_timeout_ms = static_cast<int>(num("FLEXIFORCE_PEER_TIMEOUT_MS"));
  c.max_queued_chunks = static_cast<int>(num("FLEXIFORCE_QUEUED_CHUNKS"));
  c.path_stall_ms = static_cast<int>(num("FLEXIFORCE_PATH_STALL_MS"));
  c.resend_timeout_ms = static_cast<int>(num("FLEXIFORCE_RESEND_TIMEOUT_MS"));
  c.path_stall_fast_ms = static_cast<int>(num("FLEXIFORCE_PATH_STALL_FAST_MS"));
  c.link_events = num("FLEXIFORCE_LINK_EVENTS") != 0;
  c.path_loss_ppm = static_cast<int>(num("FLEXIFORCE_PATH_LOSS_PPM"));
  c.failback_ms = static_cast<int>(num("FLEXIFORCE_FAILBACK_MS"));
  c.dual_path_ms = static_cast<int>(num("FLEXIFORCE_DUAL_PATH_MS"));
  c.eager_bytes = num("FLEXIFORCE_EAGER_BYTES");
  c.eager_ring_bytes = num("FLEXIFORCE_EAGER_RING");
  c.coalesce_us = static_cast<int>(num("FLEXIFORCE_COALESCE_US"));
  c.ack_batch = static_cast<int>(num("FLEXIFORCE_ACK_BATCH"));
  c.ack_delay_us = static_cast<int>(num("FLEXIFORCE_ACK_DELAY_US"));
  c.nic_health = num("FLEXIFORCE_NIC_HEALTH") != 0;
  c.sysfs_root = str("FLEXIFORCE_SYSFS_ROOT");
  c.traffic_class = static_cast<int>(num("FLEXIFORCE_TRAFFIC_CLASS"));
  c.topology_file = str("FLEXIFORCE_TOPOLOGY");
  c.level3_cap_pct = static_cast<int>(num("FLEXIFORCE_LEVEL3_CAP_PCT"));
  c.link_speed_mbps = num("FLEXIFORCE_LINK_SPEED_MBPS");
  c.stats_enabled = num("FLEXIFORCE_STATS") != 0;
  c.stats_keep = num("FLEXIFORCE_STATS_KEEP") != 0;
  c.stats_keep_crashed = static_cast<uint32_t>(num("FLEXIFORCE_STATS_KEEP_CRASHED"));
  c.stats_dir = str("FLEXIFORCE_STATS_DIR");
  c.stats_slots = static_cast<uint32_t>(num("FLEXIFORCE_STATS_SLOTS"));
  c.socket_ifname = str("NCCL_SOCKET_IFNAME");
  c.socket_family = str("NCCL_SOCKET_FAMILY");
  c.transport = str("FLEXIFORCE_TRANSPORT");
  c.ib_hca = str("NCCL_IB_HCA");
  c.ibverbs_library = str("FLEXIFORCE_IBVERBS_LIBRARY");
  c.ib_timeout = static_cast<int>(num("NCCL_IB_TIMEOUT"));
  c.ib_retry_cnt = static_cast<int>(num("NCCL_IB_RETRY_CNT"));
  c.ib_sl = static_cast<int>(num("NCCL_IB_SL"));
  c.ib_tc = static_cast<int>(num("NCCL_IB_TC"));
  c.ib_mtu = 1 + static_cast<int>(num("FLEXIFORCE_IB_MTU"));  // the choice's index: 256 -> IBV_MTU_256 (1)
  return c;
}

const std::vector<JobVariableSpec>& ConfigRegistry::JobSpecs() { return kJobSpecs; }

std::vector<JobValue> ConfigRegistry::ResolveJob(const EnvLookup& env, const sla::ProcessIdentity& self) {
  // The plugin's own reading of the environment (core/task_profile.cc calls the same function).
  sla::Warnings warnings;
  const sla::SlaDeclaration decl = sla::ReadSlaDeclaration(env, warnings, self);
  const Config knobs = ToConfig(Resolve(env));
  const sla::SlaLevel level = sla::ClassifySla(decl.latency_ns);
  const std::vector<std::string> messages = warnings.All();
  auto error_for = [&](const char* name) -> std::string {
    // Warnings keep one message per variable, each starting with the variable's name.
    const std::string prefix = std::string(name) + "=";
    for (const auto& m : messages)
      if (m.compare(0, prefix.size(), prefix) == 0) return m;
    return {};
  };
  auto base = [&](const JobVariableSpec& spec) {
    JobValue v{&spec};
    const char* raw = env(spec.name);
    v.set = raw != nullptr;
    if (raw) v.raw = raw;
    v.error = error_for(spec.name);
    return v;
  };
  std::vector<JobValue> out;

  // AI_SLA_LATENCY
  {
    JobValue v = base(kJobSpecs[0]);
    const sla::LevelPermits permits = sla::PermitsFor(level);
    v.value = decl.latency_ns ? FormatLatency(*decl.latency_ns) : "none";
    v.source = decl.latency_ns ? sla::kEnvSlaLatency : "default";
    std::string why = decl.latency_ns ? FormatLatency(*decl.latency_ns) + " SLA" : std::string("no SLA declared");
    why += std::string(" -> ") + LevelWords(level) + ": path tier " + sla::MaxTierName(permits.max_tier);
    if (!decl.steer) {
      why += "; observe only (AI_FLEXIFORCE_ENABLE), so the level is recorded but changes no path, traffic class "
             "or pacing";
    } else {
      sla::TrafficClassInputs tci;
      tci.steer = true;
      tci.knob = knobs.traffic_class;
      tci.level = level;
      const sla::TrafficClassDecision tc = sla::DecideTrafficClass(tci);
      why += ", TOS " + std::to_string(tc.tos) + " (DSCP " + std::to_string(tc.dscp) + ", from " +
             sla::TrafficClassSourceName(tc.source) + "; a communicator's ncclConfig.trafficClass wins)";
      if (level == sla::SlaLevel::kLevel3) {
        why += knobs.level3_cap_pct >= 100
                   ? std::string(", unpaced (FLEXIFORCE_LEVEL3_CAP_PCT=100)")
                   : ", paced to " + std::to_string(knobs.level3_cap_pct) + "% of the link (FLEXIFORCE_LEVEL3_CAP_PCT)";
      } else {
        why += ", unpaced";
      }
    }
    v.effect = why;
    if (!v.error.empty()) {
      // The parser's sentence ends with the accepted form; say what the job gets.
      const std::string tail = "; using no SLA (Level 3)";
      if (v.error.size() >= tail.size() && v.error.compare(v.error.size() - tail.size(), tail.size(), tail) == 0)
        v.error.resize(v.error.size() - tail.size());
      v.error += "; the job runs at Level 3 (no SLA)";
    }
    out.push_back(std::move(v));
  }

  // AI_TASK_ID and the launcher ids it falls back to.
  {
    JobValue v = base(kJobSpecs[1]);
    v.value = decl.task.id;
    v.source = decl.task.source;
    for (const char* name : sla::LauncherIdVariables()) {
      JobValue::Fallback f{name};
      const char* raw = env(name);
      if (raw == nullptr) {
        f.state = "unset";
      } else {
        f.raw = raw;
        // Valid alone? Ask the same resolver with only this variable set.
        sla::Warnings ignored;
        const std::string only(name);
        const sla::TaskId alone = sla::ResolveTaskId(
            [&](const char* n) -> const char* { return only == n ? raw : nullptr; }, ignored, self);
        if (alone.source != name) {
          f.state = "set, not usable as an id";
        } else if (v.source == name) {
          f.state = "used";
        } else {
          f.state = "valid, not used: an earlier variable wins";
        }
      }
      v.fallbacks.push_back(std::move(f));
    }
    if (v.source == sla::kEnvTaskId) {
      v.effect = "set by the job";
    } else if (v.source == "derived") {
      v.effect = "no AI_TASK_ID and no launcher id: a per-process id from host, pid and start time (this is "
                 "this process's; every rank derives its own, so set AI_TASK_ID for one id per job)";
    } else {
      v.effect = std::string("from the launcher's ") + v.source +
                 (v.set ? " because AI_TASK_ID is not valid" : " because AI_TASK_ID is unset");
    }
    if (!v.error.empty()) v.error += "; using " + decl.task.id + " (from " + decl.task.source + ")";
    out.push_back(std::move(v));
  }

  // AI_FLEXIFORCE_ENABLE
  {
    JobValue v = base(kJobSpecs[2]);
    v.value = decl.steer ? "steer" : "observe";
    v.source = v.set && v.error.empty() ? sla::kEnvEnable : "default";
    v.effect = decl.steer ? "steer: the oracle chooses paths and entropy, the SLA level sets traffic class and "
                            "pacing"
                          : "observe only: carry, tag and measure; no traffic class, path choice or pacing is "
                            "changed";
    out.push_back(std::move(v));
  }
  return out;
}

const Config& ConfigRegistry::Get() {
  // Never destroyed: communicators still polled by NCCL's threads during exit read it.
  static const Config* config = [] {
    auto values = Resolve([](const char* n) { return std::getenv(n); });
    for (const auto& v : values) {
      if (!v.error.empty()) FF_WARN("%s", v.error.c_str());
    }
    return new Config(ToConfig(values));
  }();
  return *config;
}

}  // namespace ff
