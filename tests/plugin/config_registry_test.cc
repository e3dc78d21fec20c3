// Config registry: defaults, valid overrides, and bad values that keep the default with a clear reason.
#include "plugin/config_registry.h"

#include <gtest/gtest.h>

#include "core/send_comm.h"
#include "core/wire_format.h"

#include <map>
#include <string>

namespace ff {
namespace {

EnvLookup Env(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const char* n) -> const char* {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

TEST(ConfigRegistry, DefaultsApplyWhenUnset) {
  Config c = ConfigRegistry::ToConfig(ConfigRegistry::Resolve(Env({})));
  EXPECT_EQ(c.paths_per_connection, 2);
  EXPECT_EQ(c.chunk_bytes, 512 * 1024);
  EXPECT_TRUE(c.spread_nics);
  EXPECT_EQ(c.traffic_class, -1);
}

TEST(ConfigRegistry, ByteSuffixesAndIntsParse) {
  Config c = ConfigRegistry::ToConfig(ConfigRegistry::Resolve(
      Env({{"FLEXIFORCE_CHUNK_SIZE", "2M"}, {"FLEXIFORCE_PATHS", "4"}, {"FLEXIFORCE_SPREAD_NICS", "0"}})));
  EXPECT_EQ(c.chunk_bytes, 2 * 1024 * 1024);
  EXPECT_EQ(c.paths_per_connection, 4);
  EXPECT_FALSE(c.spread_nics);
}

TEST(ConfigRegistry, BadValuesKeepTheDefaultAndNameTheVariableAndAcceptedForm) {
  auto values = ConfigRegistry::Resolve(
      Env({{"FLEXIFORCE_PATHS", "many"}, {"FLEXIFORCE_CHUNK_SIZE", "1T"}, {"FLEXIFORCE_SPREAD_NICS", "yes"},
           {"FLEXIFORCE_PEER_TIMEOUT_MS", "-5"}}));
  int errors = 0;
  for (const auto& v : values) {
    if (v.error.empty()) continue;
    ++errors;
    EXPECT_NE(v.error.find(v.spec->name), std::string::npos);
    EXPECT_NE(v.error.find("accepted"), std::string::npos);
    EXPECT_FALSE(v.from_env);
  }
  EXPECT_EQ(errors, 4);
  Config c = ConfigRegistry::ToConfig(values);
  EXPECT_EQ(c.paths_per_connection, 2);
  EXPECT_EQ(c.chunk_bytes, 512 * 1024);
}

TEST(ConfigRegistry, OutOfRangeIsRejected) {
  auto values = ConfigRegistry::Resolve(Env({{"FLEXIFORCE_PATHS", "17"}, {"FLEXIFORCE_CHUNK_SIZE", "100"}}));
  Config c = ConfigRegistry::ToConfig(values);
  EXPECT_EQ(c.paths_per_connection, 2);
  EXPECT_EQ(c.chunk_bytes, 512 * 1024);
}

// A socket buffer below one segment of a 64 KiB-MTU link (loopback) stalled a connection for good
// (the receive window never opened wide enough): 0 (the kernel's autotuning) or 64K and up only.
TEST(ConfigRegistry, SocketBufferIsZeroOrAtLeast64K) {
  const std::pair<const char*, int64_t> good[] = {{"0", 0}, {"64K", 65536}, {"65536", 65536}, {"4M", 4 << 20}};
  for (const auto& [ok, want] : good) {
    Config c = ConfigRegistry::ToConfig(ConfigRegistry::Resolve(Env({{"FLEXIFORCE_SOCKET_BUFFER", ok}})));
    EXPECT_EQ(c.socket_buffer_bytes, want) << ok;
  }
  for (const char* bad : {"1", "4096", "12288", "16K", "65535", "-1"}) {
    auto values = ConfigRegistry::Resolve(Env({{"FLEXIFORCE_SOCKET_BUFFER", bad}}));
    std::string error;
    for (const auto& v : values)
      if (std::string(v.spec->name) == "FLEXIFORCE_SOCKET_BUFFER") error = v.error;
    EXPECT_EQ(error, std::string("FLEXIFORCE_SOCKET_BUFFER='") + bad +
                         "' is not valid; accepted: 0, or bytes from 65536 to 1073741824, optionally with a K, M "
                         "or G suffix; using the default 0");
    EXPECT_EQ(ConfigRegistry::ToConfig(values).socket_buffer_bytes, 0) << bad;
  }
}

TEST(ConfigRegistry, EveryKnobIsDocumented) {
  for (const auto& s : ConfigRegistry::Specs()) {
    EXPECT_GT(std::string(s.doc).size(), 20u) << s.name;
  }
}

// "128 KiB", "4 MiB": how the knobs' texts write a power-of-two byte count.
std::string Bytes(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b >> 10) + " KiB";
}

const KnobSpec& Spec(const std::string& name) {
  for (const auto& s : ConfigRegistry::Specs())
    if (name == s.name) return s;
  ADD_FAILURE() << name << " is not in the registry";
  return ConfigRegistry::Specs().front();
}

// The texts that state the data path's fixed bounds name the values the code uses (flexiforce config,
// docs/REFERENCE.md and README's table all come from here); the held-send bound once went from
// 512 KiB to 4 MiB while the text kept 512 KiB.
TEST(ConfigRegistry, KnobTextsNameTheBoundsTheDataPathUses) {
  const std::string coalesce = Spec("FLEXIFORCE_COALESCE_US").doc;
  EXPECT_NE(coalesce.find("at most " + std::to_string(SendComm::kMaxHeld) + ";"), std::string::npos) << coalesce;
  EXPECT_NE(coalesce.find(Bytes(SendComm::kMaxHeldBytes) + " of eager sends"), std::string::npos) << coalesce;
  EXPECT_NE(coalesce.find(Bytes(SendComm::kMaxHeldRendezvousBytes) + " with larger ones"), std::string::npos)
      << coalesce;
  const std::string delay = Spec("FLEXIFORCE_ACK_DELAY_US").doc;
  EXPECT_NE(delay.find(Bytes(kMaxUnsolicitedBytes / kMaxUnsolicitedMsgs) + " or less in all"), std::string::npos)
      << delay;
}

TEST(ConfigRegistry, TcpCongestionIsEmptyByDefaultAndTakesOnlyAnAlgorithmName) {
  EXPECT_EQ(ConfigRegistry::ToConfig(ConfigRegistry::Resolve(Env({}))).tcp_congestion, "");
  for (const char* ok : {"cubic", "bbr", "dctcp", "tcp_new_2", "abcdefghijklmno"})
    EXPECT_EQ(ConfigRegistry::ToConfig(ConfigRegistry::Resolve(Env({{"FLEXIFORCE_TCP_CONGESTION", ok}}))).tcp_congestion,
              ok);
  for (const char* bad : {"Cubic", "bbr ", "cubic;reno", "../x", "abcdefghijklmnop"}) {
    auto values = ConfigRegistry::Resolve(Env({{"FLEXIFORCE_TCP_CONGESTION", bad}}));
    std::string error;
    for (const auto& v : values)
      if (std::string(v.spec->name) == "FLEXIFORCE_TCP_CONGESTION") error = v.error;
    EXPECT_EQ(error, std::string("FLEXIFORCE_TCP_CONGESTION='") + bad +
                         "' is not valid; accepted: a name of 1 to 15 lowercase letters, digits and '_' (e.g. "
                         "cubic), or empty; using the default (empty)");
    EXPECT_EQ(ConfigRegistry::ToConfig(values).tcp_congestion, "") << bad;
  }
}

TEST(ConfigRegistry, TransportIsAutoByDefaultAndTakesOnlyItsThreeWords) {
  EXPECT_EQ(ConfigRegistry::ToConfig(ConfigRegistry::Resolve(Env({}))).transport, "auto");
  for (const char* w : {"auto", "verbs", "tcp"})
    EXPECT_EQ(ConfigRegistry::ToConfig(ConfigRegistry::Resolve(Env({{"FLEXIFORCE_TRANSPORT", w}}))).transport, w);
  for (const char* bad : {"rdma", "VERBS", "tc", "auto|tcp", " tcp"}) {
    auto values = ConfigRegistry::Resolve(Env({{"FLEXIFORCE_TRANSPORT", bad}}));
    std::string error;
    for (const auto& v : values)
      if (std::string(v.spec->name) == "FLEXIFORCE_TRANSPORT") error = v.error;
    EXPECT_EQ(error, std::string("FLEXIFORCE_TRANSPORT='") + bad +
                         "' is not valid; accepted: auto, verbs or tcp; using the default auto");
    EXPECT_EQ(ConfigRegistry::ToConfig(values).transport, "auto") << bad;
  }
}

}  // namespace
}  // namespace ff
