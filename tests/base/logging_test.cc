// The plugin's log lines reach NCCL's logger with flags NCCL's NCCL_DEBUG_SUBSYS filter lets through:
// warnings carry every subsystem bit (NCCL drops any line whose flags miss its mask, warnings too, and
// the default mask has no NET bit); INFO lines carry their own subsystem. Also the drivers' parser of
// NCCL_DEBUG_SUBSYS (cli/plugin_loader.h), which follows NCCL's.
#include "base/logging.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/plugin_loader.h"

namespace ff {
namespace {

struct Line {
  ncclDebugLogLevel level;
  unsigned long flags;
};
std::vector<Line> g_lines;

void Capture(ncclDebugLogLevel level, unsigned long flags, const char*, int, const char*, ...) {
  g_lines.push_back({level, flags});
}

// NCCL's rule (debug.cc): a line is printed only if its flags share a bit with the mask.
bool ShownUnder(unsigned long mask, const Line& l) { return (l.flags & mask) != 0; }

TEST(Logging, WarningsPassNcclsDefaultSubsystemMaskAndInfoKeepsItsSubsystem) {
  g_lines.clear();
  SetNcclLogger(&Capture);
  FF_WARN("a warning %d", 1);
  FF_INFO(NCCL_NET, "a NET line");
  FF_INFO(NCCL_INIT | NCCL_NET, "an INIT line");
  SetNcclLogger(nullptr);
  ASSERT_EQ(g_lines.size(), 3u);
  const unsigned long nccl_default = NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
  EXPECT_EQ(g_lines[0].level, NCCL_LOG_WARN);
  EXPECT_TRUE(ShownUnder(nccl_default, g_lines[0])) << "flags " << std::hex << g_lines[0].flags;
  EXPECT_TRUE(ShownUnder(NCCL_COLL, g_lines[0])) << "a warning must show whatever subsystems are selected";
  EXPECT_EQ(g_lines[1].flags, static_cast<unsigned long>(NCCL_NET));
  EXPECT_FALSE(ShownUnder(nccl_default, g_lines[1]));
  EXPECT_TRUE(ShownUnder(nccl_default, g_lines[2]));
}

TEST(Logging, DriversReadNcclDebugSubsysAsNcclDoes) {
  using ff::testing::ParseDebugSubsys;
  EXPECT_EQ(ParseDebugSubsys(nullptr), static_cast<unsigned long>(NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV));
  EXPECT_EQ(ParseDebugSubsys("NET"), static_cast<unsigned long>(NCCL_NET));
  EXPECT_EQ(ParseDebugSubsys("init,net"), static_cast<unsigned long>(NCCL_INIT | NCCL_NET));
  EXPECT_EQ(ParseDebugSubsys("ALL"), static_cast<unsigned long>(NCCL_ALL));
  EXPECT_EQ(ParseDebugSubsys("^NET"), static_cast<unsigned long>(NCCL_ALL) & ~static_cast<unsigned long>(NCCL_NET));
  EXPECT_EQ(ParseDebugSubsys("^INIT,ENV"),
            static_cast<unsigned long>(NCCL_ALL) & ~static_cast<unsigned long>(NCCL_INIT | NCCL_ENV));
  EXPECT_EQ(ParseDebugSubsys("NETWORK,NET,"), static_cast<unsigned long>(NCCL_NET)) << "unknown names are ignored";
  EXPECT_EQ(ParseDebugSubsys(""), 0ul);
  EXPECT_EQ(ParseDebugSubsys("BOOTSTRAP,PROFILE"), static_cast<unsigned long>(NCCL_BOOTSTRAP | NCCL_PROFILE));
}

}  // namespace
}  // namespace ff
