// NCCL_IB_HCA: prefix, exact, exclusion, ports, whitespace, and clear errors on malformed input.
#include "verbs/hca_filter.h"

#include <gtest/gtest.h>

namespace ff::verbs {
namespace {

HcaFilter Parsed(const char* spec) {
  HcaFilter f;
  Status s = HcaFilter::Parse(spec, &f);
  EXPECT_TRUE(s.ok()) << spec << ": " << s.message();
  return f;
}

TEST(HcaFilter, EmptyOrBlankAllowsEverything) {
  for (const char* spec : {"", "   ", ","}) {
    HcaFilter f = Parsed(spec);
    EXPECT_TRUE(f.empty()) << spec;
    EXPECT_TRUE(f.Matches("mlx5_0", 1));
    EXPECT_TRUE(f.Matches("rxe0", 2));
  }
}

TEST(HcaFilter, PlainNamesArePrefixesOverAllPorts) {
  HcaFilter f = Parsed("mlx5");
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_TRUE(f.Matches("mlx5_11", 2));
  EXPECT_FALSE(f.Matches("rxe0", 1));
  EXPECT_FALSE(f.Matches("mlx4_0", 1));
  // Prefix means the device name starts with the entry, not the other way round.
  EXPECT_FALSE(Parsed("mlx5_0").Matches("mlx5", 1));
  EXPECT_TRUE(Parsed("mlx5_1").Matches("mlx5_10", 1));
}

TEST(HcaFilter, PortRestrictsToThatPort) {
  HcaFilter f = Parsed("mlx5_0:1,mlx5_1");
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_FALSE(f.Matches("mlx5_0", 2));
  EXPECT_TRUE(f.Matches("mlx5_1", 2));
  ASSERT_EQ(f.entries().size(), 2u);
  EXPECT_EQ(f.entries()[0].port, 1);
  EXPECT_EQ(f.entries()[1].port, -1);
}

TEST(HcaFilter, EqualsMakesTheWholeListExact) {
  HcaFilter f = Parsed("=mlx5_0:1,mlx5_1:1");
  EXPECT_TRUE(f.exact());
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_TRUE(f.Matches("mlx5_1", 1));
  EXPECT_FALSE(f.Matches("mlx5_10", 1));  // a prefix filter would take it
  EXPECT_FALSE(f.Matches("mlx5_1", 2));
}

TEST(HcaFilter, CaretExcludes) {
  HcaFilter f = Parsed("^mlx5_1");
  EXPECT_TRUE(f.exclude());
  EXPECT_FALSE(f.Matches("mlx5_1", 1));
  EXPECT_FALSE(f.Matches("mlx5_10", 1));  // prefix
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_TRUE(f.Matches("rxe0", 1));
}

TEST(HcaFilter, CaretEqualsExcludesExactNamesAndPorts) {
  HcaFilter f = Parsed("^=mlx5_1,mlx5_4:2");
  EXPECT_TRUE(f.exclude());
  EXPECT_TRUE(f.exact());
  EXPECT_FALSE(f.Matches("mlx5_1", 1));
  EXPECT_TRUE(f.Matches("mlx5_10", 1));
  EXPECT_TRUE(f.Matches("mlx5_4", 1));
  EXPECT_FALSE(f.Matches("mlx5_4", 2));
  // Device-level pre-filter: mlx5_1 is gone entirely, mlx5_4 keeps port 1.
  EXPECT_FALSE(f.MayMatchDevice("mlx5_1"));
  EXPECT_TRUE(f.MayMatchDevice("mlx5_4"));
  EXPECT_TRUE(f.MayMatchDevice("mlx5_0"));
  EXPECT_FALSE(Parsed("=rxe0").MayMatchDevice("rxe01"));
  EXPECT_TRUE(Parsed("rxe0:1").MayMatchDevice("rxe01"));
}

TEST(HcaFilter, WhitespaceAroundEntriesIsTolerated) {
  HcaFilter f = Parsed("  ^ = mlx5_0 : 1 ,  rxe0  ");
  EXPECT_TRUE(f.exclude());
  EXPECT_TRUE(f.exact());
  ASSERT_EQ(f.entries().size(), 2u);
  EXPECT_EQ(f.entries()[0].device, "mlx5_0");
  EXPECT_EQ(f.entries()[0].port, 1);
  EXPECT_EQ(f.entries()[1].device, "rxe0");
  EXPECT_FALSE(f.Matches("rxe0", 1));
  EXPECT_TRUE(f.Matches("mlx5_0", 2));
}

TEST(HcaFilter, MalformedInputIsAClearErrorAndLeavesTheFilterUntouched) {
  struct Case {
    const char* spec;
    const char* problem;
  };
  for (const Case& c :
       {Case{"mlx5_0:x", "port must be a number from 1 to 255"},
        Case{"mlx5_0:0", "port must be a number from 1 to 255"},
        Case{"mlx5_0:", "port must be a number from 1 to 255"}, Case{"mlx5_0:1:2", "port must be a number"},
        Case{":1", "device name must be"}, Case{"mlx5 0", "device name must be"},
        Case{"mlx5_0,^mlx5_1", "'^' and '=' apply to the whole list"},
        Case{"=mlx5_0,=mlx5_1", "'^' and '=' apply to the whole list"},
        Case{"^", "no device after the leading"}, Case{"^=,", "no device after the leading"}}) {
    HcaFilter f = Parsed("rxe");
    Status s = HcaFilter::Parse(c.spec, &f);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.message().find(std::string("NCCL_IB_HCA='") + c.spec + "'"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(c.problem), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("accepted form: [^][=]DEVICE[:PORT]"), std::string::npos) << s.message();
    ASSERT_EQ(f.entries().size(), 1u) << c.spec;  // untouched
    EXPECT_EQ(f.entries()[0].device, "rxe");
  }
}

}  // namespace
}  // namespace ff::verbs
