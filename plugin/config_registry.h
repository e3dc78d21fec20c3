// The one registry of FlexiForce's configuration knobs: name, type, default, range and meaning.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sla/task_identity.h"

namespace ff {

enum class KnobType { kInt, kBytes, kBool, kString, kChoice };

struct KnobSpec {
  const char* name;
  KnobType type;
  const char* default_value;
  int64_t min;  // inclusive bounds for numeric knobs
  int64_t max;
  const char* doc;
  const char* choices = nullptr;  // kChoice: the accepted words, '|'-separated; number = the word's index
  bool zero_means_off = false;    // numeric knobs: 0 is accepted besides [min, max] (off, or the kernel's default)
  bool identifier = false;        // kString: empty, or 1 to `max` lowercase letters, digits and '_'
};

// A knob's resolved value and where it came from.
struct KnobValue {
  const KnobSpec* spec;
  std::string text;      // effective value as text
  int64_t number = 0;    // effective value for numeric/bool knobs
  bool from_env = false; // set (validly) in the environment
  std::string error;     // non-empty when the environment held a bad value (default used)
};

using EnvLookup = std::function<const char*(const char*)>;

// Typed view of every knob, read once.
struct Config {
  int paths_per_connection;
  int64_t chunk_bytes;
  int64_t stripe_min_bytes;
  bool spread_nics;
  int64_t socket_buffer_bytes;
  std::string tcp_congestion;  // FLEXIFORCE_TCP_CONGESTION; empty: the system's default
  int connect_timeout_ms;
  int peer_timeout_ms;
  int max_queued_chunks;
  int path_stall_ms;
  int resend_timeout_ms;
  int path_stall_fast_ms;  // FLEXIFORCE_PATH_STALL_FAST_MS; 0: only the absolute stall rule
  bool link_events;
  int path_loss_ppm;     // FLEXIFORCE_PATH_LOSS_PPM: the soft rule's loss threshold
  int failback_ms;       // FLEXIFORCE_FAILBACK_MS; 0: failed paths stay down
  int dual_path_ms;      // FLEXIFORCE_DUAL_PATH_MS; 0: no canary comparison
  int64_t eager_bytes;       // FLEXIFORCE_EAGER_BYTES; 0: no eager sends
  int64_t eager_ring_bytes;  // FLEXIFORCE_EAGER_RING
  int coalesce_us;           // FLEXIFORCE_COALESCE_US
  int ack_batch;             // FLEXIFORCE_ACK_BATCH
  int ack_delay_us;          // FLEXIFORCE_ACK_DELAY_US
  bool nic_health;       // FLEXIFORCE_NIC_HEALTH
  std::string sysfs_root;  // FLEXIFORCE_SYSFS_ROOT
  int traffic_class;
  int level3_cap_pct;       // FLEXIFORCE_LEVEL3_CAP_PCT
  int64_t link_speed_mbps;  // FLEXIFORCE_LINK_SPEED_MBPS; 0: the device's own speed
  std::string topology_file;
  bool stats_enabled;
  bool stats_keep;
  uint32_t stats_keep_crashed;  // FLEXIFORCE_STATS_KEEP_CRASHED
  std::string stats_dir;
  uint32_t stats_slots;  // FLEXIFORCE_STATS_SLOTS
  std::string socket_ifname;  // NCCL_SOCKET_IFNAME
  std::string socket_family;  // NCCL_SOCKET_FAMILY
  std::string transport;      // FLEXIFORCE_TRANSPORT: "auto", "verbs" or "tcp"
  std::string ib_hca;         // NCCL_IB_HCA
  std::string ibverbs_library;  // FLEXIFORCE_IBVERBS_LIBRARY; empty: libibverbs.so.1
  int ib_timeout;    // NCCL_IB_TIMEOUT: 4.096 us x 2^N per try
  int ib_retry_cnt;  // NCCL_IB_RETRY_CNT
  int ib_sl;         // NCCL_IB_SL; -1: unset
  int ib_tc;         // NCCL_IB_TC; -1: unset
  int ib_mtu;        // FLEXIFORCE_IB_MTU as an ibv_mtu value (1 = 256 ... 5 = 4096)
};

// A variable the training job sets about itself (AI_*): parsed by sla/'s parsers, not by the knob table.
struct JobVariableSpec {
  const char* name;
  const char* default_value;  // what applies when unset, in words
  const char* accepted;       // the accepted form
  const char* doc;
};

// What the plugin makes of one job variable in a given environment.
struct JobValue {
  const JobVariableSpec* spec;
  bool set = false;     // present in the environment
  std::string raw;      // its text when set
  std::string value;    // the value the plugin uses (e.g. "50 us", "llama-run3", "steer")
  std::string source;   // where that value came from: the variable's name, a fallback's name, or "default"
  std::string effect;   // why / what it does, in one sentence
  std::string error;    // the parser's complaint and what applies instead; empty when valid or unset
  struct Fallback {
    std::string name;
    std::string raw;    // empty when unset
    std::string state;  // "unset", "used", "valid, not reached", "set, not a valid id"
  };
  std::vector<Fallback> fallbacks;  // AI_TASK_ID only: the launcher ids, in the order tried
};

class ConfigRegistry {
 public:
  static const std::vector<KnobSpec>& Specs();

  // Resolves every knob from `env`; bad values keep their default and carry an error.
  static std::vector<KnobValue> Resolve(const EnvLookup& env);
  static Config ToConfig(const std::vector<KnobValue>& values);

  // Parses one value the way Resolve does; returns false with `error` set when invalid.
  static bool ParseValue(const KnobSpec& spec, const std::string& text, int64_t* number, std::string* error);
  // A kChoice knob's accepted words in prose: "auto, verbs or tcp".
  static std::string ChoiceWords(const KnobSpec& spec);

  // The job-facing variables AI_SLA_LATENCY, AI_TASK_ID (with its launcher fallbacks) and AI_FLEXIFORCE_ENABLE.
  static const std::vector<JobVariableSpec>& JobSpecs();
  // Resolves them with the plugin's own parsers (sla/): the same values a job started in `env` gets.
  // `self` feeds the derived task id when no id variable is usable.
  static std::vector<JobValue> ResolveJob(const EnvLookup& env,
                                          const sla::ProcessIdentity& self = sla::CurrentProcessIdentity());

  // Process-wide config from the real environment, resolved (and bad values logged) once.
  static const Config& Get();
};

}  // namespace ff
