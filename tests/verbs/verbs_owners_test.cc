// Owner types: each handle is released exactly once, by the matching destroy call, in reverse
// declaration order; moved-from owners release nothing; factories report failures by name and errno.
#include "verbs/verbs_owners.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "tests/verbs/fake_verbs.h"

namespace ff::verbs {
namespace {

int Count(const std::string& log, const std::string& line) {
  int n = 0;
  for (size_t pos = log.find(line); pos != std::string::npos; pos = log.find(line, pos + 1)) ++n;
  return n;
}

TEST(VerbsOwners, ResourcesAreReleasedOnceInReverseOrder) {
  testing::FakeVerbs fake("mlx5_0=A");
  const auto& ib = fake.loader();
  ASSERT_TRUE(ib.available()) << ib.error();
  {
    DeviceListOwner list;
    int n = 0;
    ASSERT_TRUE(GetDeviceList(ib, &list, &n).ok());
    ASSERT_EQ(n, 1);
    // Members in the documented order: context, channel, PD, CQ, MR, QP.
    ContextOwner ctx;
    ASSERT_TRUE(OpenDevice(ib, list.get()[0], &ctx).ok());
    CompChannelOwner ch;
    ASSERT_TRUE(CreateCompChannel(ib, ctx.get(), &ch).ok());
    PdOwner pd;
    ASSERT_TRUE(AllocPd(ib, ctx.get(), &pd).ok());
    CqOwner cq;
    ASSERT_TRUE(CreateCq(ib, ctx.get(), 256, ch.get(), 0, &cq).ok());
    EXPECT_EQ(cq->cqe, 256);
    EXPECT_EQ(cq->channel, ch.get());
    static char buf[4096];
    MrOwner mr;
    ASSERT_TRUE(RegMr(ib, pd.get(), buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, &mr).ok());
    EXPECT_EQ(mr->addr, buf);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq.get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 16;
    QpOwner qp;
    ASSERT_TRUE(CreateQp(ib, pd.get(), &init, &qp).ok());
    // A move transfers ownership: the moved-from owner must not destroy the QP a second time.
    QpOwner moved = std::move(qp);
    EXPECT_EQ(qp.get(), nullptr);
    fake.ResetLog();
  }
  EXPECT_EQ(fake.log(),
            "destroy_qp mlx5_0\n"
            "dereg_mr mlx5_0\n"
            "destroy_cq mlx5_0\n"
            "dealloc_pd mlx5_0\n"
            "destroy_comp_channel mlx5_0\n"
            "close_device mlx5_0\n"
            "free_device_list \n");
}

TEST(VerbsOwners, ResetReleasesAtOnceAndNullOwnersReleaseNothing) {
  testing::FakeVerbs fake("rxe0=A");
  const auto& ib = fake.loader();
  DeviceListOwner list;
  int n = 0;
  ASSERT_TRUE(GetDeviceList(ib, &list, &n).ok());
  ContextOwner ctx;
  ASSERT_TRUE(OpenDevice(ib, list.get()[0], &ctx).ok());
  PdOwner pd;
  ASSERT_TRUE(AllocPd(ib, ctx.get(), &pd).ok());
  pd.reset();
  EXPECT_EQ(Count(fake.log(), "dealloc_pd rxe0"), 1);
  { PdOwner empty; }  // no deleter call on nullptr
  EXPECT_EQ(Count(fake.log(), "dealloc_pd"), 1);
}

TEST(VerbsOwners, FactoryFailureNamesCallObjectAndErrno) {
  testing::FakeVerbs fake("mlx5_1=A");
  const auto& ib = fake.loader();
  DeviceListOwner list;
  int n = 0;
  ASSERT_TRUE(GetDeviceList(ib, &list, &n).ok());
  ContextOwner ctx;
  ASSERT_TRUE(OpenDevice(ib, list.get()[0], &ctx).ok());
  fake.FailNext("ibv_alloc_pd", ENOMEM);
  PdOwner pd;
  Status s = AllocPd(ib, ctx.get(), &pd);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kSystem);
  EXPECT_NE(s.message().find("ibv_alloc_pd(mlx5_1)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("errno 12"), std::string::npos) << s.message();
  EXPECT_EQ(pd.get(), nullptr);

  fake.FailNext("ibv_create_cq", EINVAL);
  CqOwner cq;
  s = CreateCq(ib, ctx.get(), 1 << 30, nullptr, 0, &cq);
  EXPECT_NE(s.message().find("ibv_create_cq(mlx5_1, 1073741824 entries)"), std::string::npos) << s.message();
}

TEST(VerbsOwners, FactoriesRefuseWhenLibraryUnavailable) {
  IbverbsLoader missing("libibverbs-not-here.so.1");
  PdOwner pd;
  Status s = AllocPd(missing, nullptr, &pd);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidUsage);
  EXPECT_NE(s.message().find("libibverbs unavailable"), std::string::npos) << s.message();
  MrOwner mr;
  s = RegDmabufMr(missing, nullptr, 0, 4096, 0, -1, 0, &mr);
  EXPECT_FALSE(s.ok());
}

TEST(VerbsOwners, DmabufRegistrationOnOldLibraryIsAClearError) {
  testing::FakeVerbs fake("mlx5_0=A");
  MrOwner mr;
  Status s = RegDmabufMr(fake.loader(), nullptr, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE, &mr);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidUsage);
  EXPECT_NE(s.message().find("predates it"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ff::verbs
