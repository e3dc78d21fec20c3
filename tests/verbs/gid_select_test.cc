// RoCE GID auto-selection on realistic tables (mlx5 v1/v2 pairs, rxe, link-local only, InfiniBand),
// the address-family restriction, the NCCL_IB_GID_INDEX override and its validation.
#include "verbs/gid_select.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "tests/verbs/verbs_fixture.h"

namespace ff::verbs {
namespace {

class GidSelect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { fixture_ = new testing::VerbsFixture(); }
  static void TearDownTestSuite() {
    delete fixture_;
    fixture_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(fixture_->ok()) << "make_verbs_fixture.py failed"; }

  std::vector<GidEntry> Table(const char* dev) {
    std::vector<std::string> warnings;
    auto t = ReadGidTable(fixture_->root(), dev, 1, &warnings);
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    return t;
  }
  // The chosen index, or -1 with the error in *error.
  int Choose(const char* dev, bool ib, GidPolicy policy, std::string* error = nullptr) {
    GidEntry e;
    Status s = SelectGid(Table(dev), ib, policy, std::string(dev) + " port 1", &e);
    if (!s.ok()) {
      if (error) *error = s.message();
      return -1;
    }
    return e.index;
  }

  static testing::VerbsFixture* fixture_;
};
testing::VerbsFixture* GidSelect::fixture_ = nullptr;

TEST_F(GidSelect, ReadsTheTableWithTypesAndNetdevs) {
  auto t = Table("mlx5_0");
  ASSERT_EQ(t.size(), 8u);  // 3 addresses x (v1, v2) + 2 unset
  EXPECT_EQ(t[0].type, GidType::kIbRoceV1);
  EXPECT_EQ(t[1].type, GidType::kRoceV2);
  EXPECT_TRUE(IsLinkLocalGid(t[1].raw));
  EXPECT_TRUE(IsIpv4MappedGid(t[3].raw));
  EXPECT_EQ(t[3].ndev, "ens1f0np0");
  EXPECT_EQ(t[3].text, "0000:0000:0000:0000:0000:ffff:0a01:000b");
  EXPECT_TRUE(IsZeroGid(t[6].raw));
  EXPECT_EQ(t[6].type, GidType::kUnknown);
}

TEST_F(GidSelect, Mlx5PrefersRoceV2Ipv4) { EXPECT_EQ(Choose("mlx5_0", false, {}), 3); }

TEST_F(GidSelect, AddressFamilyRestrictsTheChoice) {
  EXPECT_EQ(Choose("mlx5_0", false, {AF_INET, -1}), 3);
  EXPECT_EQ(Choose("mlx5_0", false, {AF_INET6, -1}), 5);  // fd00:1::11 v2, never the link-local v2 at 1
}

TEST_F(GidSelect, RxeChoosesItsIpv4V2Entry) { EXPECT_EQ(Choose("rxe0", false, {}), 3); }

TEST_F(GidSelect, LinkLocalOnlyPortHasNoUsableGid) {
  std::string error;
  EXPECT_EQ(Choose("mlx5_2", false, {}, &error), -1);
  EXPECT_NE(error.find("mlx5_2 port 1: no usable RoCE GID for any family among 6 entries"), std::string::npos)
      << error;
  EXPECT_NE(error.find("NCCL_IB_GID_INDEX"), std::string::npos) << error;
  EXPECT_EQ(Choose("mlx5_0", false, {AF_INET6, -1}), 5);
  EXPECT_EQ(Choose("rxe0", false, {AF_INET6, -1}, &error), -1);  // rxe0 has no global IPv6 address
  EXPECT_NE(error.find("for AF_INET6"), std::string::npos) << error;
}

TEST_F(GidSelect, InfinibandUsesThePortGidEvenThoughItIsLinkLocal) {
  EXPECT_EQ(Choose("mlx5_3", true, {}), 0);
}

TEST_F(GidSelect, OverrideIsHonouredWhenItExistsAndIsSet) {
  EXPECT_EQ(Choose("mlx5_0", false, {0, 2}), 2);         // a v1 entry: the user's choice wins
  EXPECT_EQ(Choose("mlx5_0", false, {AF_INET6, 3}), 3);  // and over the family too
}

TEST_F(GidSelect, OverrideOfMissingOrUnsetIndexIsAClearError) {
  std::string error;
  EXPECT_EQ(Choose("mlx5_0", false, {0, 42}, &error), -1);
  EXPECT_NE(error.find("mlx5_0 port 1: NCCL_IB_GID_INDEX=42 does not exist"), std::string::npos) << error;
  EXPECT_EQ(Choose("mlx5_0", false, {0, 7}, &error), -1);
  EXPECT_NE(error.find("NCCL_IB_GID_INDEX=7 is an unpopulated (all-zero) GID"), std::string::npos) << error;
}

GidEntry Entry(int index, const char* addr, GidType type) {
  GidEntry e;
  e.index = index;
  e.type = type;
  EXPECT_EQ(inet_pton(AF_INET6, addr, e.raw.data()), 1) << addr;
  return e;
}

TEST(GidSelectRules, V2BeatsV1EvenWhenV1IsIpv4AndIpv4BeatsIpv6WithinV2) {
  std::vector<GidEntry> t = {Entry(0, "::ffff:10.0.0.1", GidType::kIbRoceV1),
                             Entry(1, "2001:db8::1", GidType::kRoceV2)};
  GidEntry e;
  ASSERT_TRUE(SelectGid(t, false, {}, "t", &e).ok());
  EXPECT_EQ(e.index, 1);
  t.push_back(Entry(2, "::ffff:10.0.0.1", GidType::kRoceV2));
  ASSERT_TRUE(SelectGid(t, false, {}, "t", &e).ok());
  EXPECT_EQ(e.index, 2);
  // Only v1 left: still usable (an L2-only fabric), the IPv4 one first.
  t = {Entry(4, "2001:db8::1", GidType::kIbRoceV1), Entry(5, "::ffff:10.0.0.1", GidType::kIbRoceV1)};
  ASSERT_TRUE(SelectGid(t, false, {}, "t", &e).ok());
  EXPECT_EQ(e.index, 5);
}

TEST(GidSelectRules, LinkLocalCoversTheWholeFe80Slash10) {
  GidEntry a = Entry(0, "febf::1", GidType::kRoceV2);
  GidEntry b = Entry(1, "fec0::1", GidType::kRoceV2);  // just outside fe80::/10
  EXPECT_TRUE(IsLinkLocalGid(a.raw));
  EXPECT_FALSE(IsLinkLocalGid(b.raw));
  GidEntry e;
  ASSERT_TRUE(SelectGid({a, b}, false, {}, "t", &e).ok());
  EXPECT_EQ(e.index, 1);
}

TEST(GidSelectRules, MalformedSysfsEntryIsSkippedWithAWarningNamingTheFile) {
  testing::VerbsFixture f;
  ASSERT_TRUE(f.ok());
  const std::string path = f.root() + "/sys/class/infiniband/mlx5_0/ports/1/gids/3";
  FILE* fp = std::fopen(path.c_str(), "w");
  ASSERT_NE(fp, nullptr);
  std::fputs("not-a-gid\n", fp);
  std::fclose(fp);
  std::vector<std::string> warnings;
  auto t = ReadGidTable(f.root(), "mlx5_0", 1, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("gids/3: 'not-a-gid' is not a GID"), std::string::npos) << warnings[0];
  GidEntry e;
  ASSERT_TRUE(SelectGid(t, false, {}, "mlx5_0 port 1", &e).ok());
  EXPECT_EQ(e.index, 5);  // the IPv4 v2 entry is gone: the IPv6 v2 one is next
}

TEST(GidSelectKnobs, AddrFamilyAndGidIndexParseOrNameTheAcceptedForm) {
  int fam = -7;
  EXPECT_TRUE(ParseAddrFamily(" AF_INET6 ", &fam).ok());
  EXPECT_EQ(fam, AF_INET6);
  EXPECT_TRUE(ParseAddrFamily("", &fam).ok());
  EXPECT_EQ(fam, 0);
  Status s = ParseAddrFamily("inet", &fam);
  EXPECT_NE(s.message().find("NCCL_IB_ADDR_FAMILY='inet': accepted values are AF_INET or AF_INET6"),
            std::string::npos)
      << s.message();
  int idx = 0;
  EXPECT_TRUE(ParseGidIndex("3", &idx).ok());
  EXPECT_EQ(idx, 3);
  EXPECT_TRUE(ParseGidIndex("-1", &idx).ok());
  EXPECT_EQ(idx, -1);
  for (const char* bad : {"x", "3a", "-2", "70000"}) {
    s = ParseGidIndex(bad, &idx);
    EXPECT_NE(s.message().find(std::string("NCCL_IB_GID_INDEX='") + bad + "': accepted values"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace ff::verbs
