// The statistics writer under hostile conditions: a full directory, file mode, long jobs' peer keys.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "sla/task_stats.h"

namespace ff::sla {
namespace {

class StatsFileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ff-stats-writer-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::umount2(dir_.c_str(), MNT_DETACH);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

// Docker's default /dev/shm is 64 MB and fills up; a 64 KiB tmpfs stands for a full one. The
// table (~850 KiB) must fail to open, cleanly: before, a sparse file opened fine and the job died
// of SIGBUS at the first store to an unbacked page.
TEST_F(StatsFileWriterTest, FullDirectoryFailsToOpenInsteadOfSigbus) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a 64 KiB tmpfs";
  ASSERT_EQ(::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k"), 0) << std::strerror(errno);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StatsTableOptions o;
    o.dir = dir_;
    std::string error;
    auto t = StatsTable::Open(o, &error);
    if (!t) {
      std::fprintf(stderr, "open failed as expected: %s\n", error.c_str());
      ::_exit(error.find("cannot reserve") != std::string::npos ? 0 : 3);
    }
    // Touch every slot's page, as a long job does.
    for (int i = 0; i < 1024; ++i) t->Record({"job", Collective::kAllReduce, "rank" + std::to_string(i), 0}, 1, 1,
                                             Direction::kSend);
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the table opened on a full tmpfs; 3: another error";
  // Nothing half-made is left behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(StatsFileWriterTest, FileIsReadableByItsOwnerOnly) {
  StatsTableOptions o;
  o.dir = dir_;
  std::string error;
  const mode_t old = ::umask(0);  // the mode must not depend on the job's umask
  auto t = StatsTable::Open(o, &error);
  ::umask(old);
  ASSERT_TRUE(t) << error;
  struct stat st {};
  ASSERT_EQ(::stat(t->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A long job opens thousands of connections, each from a new ephemeral port; keyed by address
// they share the slots of their peer host, and nothing is dropped.
TEST_F(StatsFileWriterTest, ThousandsOfPeerPortsShareTheirHostsSlots) {
  StatsTableOptions o;
  o.dir = dir_;
  o.slots = 64;
  std::string error;
  auto t = StatsTable::Open(o, &error);
  ASSERT_TRUE(t) << error;
  for (int port = 20000; port < 25000; ++port) {
    const std::string recv_peer = "10.0.0.1:5000->10.0.0." + std::to_string(2 + port % 4) + ":" + std::to_string(port);
    const std::string send_peer = "[fe80::" + std::to_string(1 + port % 3) + "]:" + std::to_string(port);
    t->Record({"job", Collective::kAllReduce, recv_peer, 0}, 10, 100, Direction::kRecv);
    t->Record({"job", Collective::kAllReduce, send_peer, 0}, 10, 100, Direction::kSend);
  }
  auto snap = ReadStatsFile(t->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->dropped, 0u);
  ASSERT_EQ(snap->slots.size(), 7u);  // 4 IPv4 hosts + 3 IPv6 hosts
  uint64_t messages = 0;
  for (const auto& s : snap->slots) {
    EXPECT_EQ(s.peer.find(':') == std::string::npos, s.peer.rfind("fe80", 0) != 0) << s.peer;
    messages += s.send.messages + s.recv.messages;
  }
  EXPECT_EQ(messages, 10000u);
}

}  // namespace
}  // namespace ff::sla
