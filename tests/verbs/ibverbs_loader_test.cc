// The dlopen loader: missing or incomplete libraries give "unavailable" with the reason, never a
// crash; a complete one resolves every call; the compat ibv_query_port path fills the full struct.
#include "verbs/ibverbs_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "tests/verbs/fake_verbs.h"

namespace ff::verbs {
namespace {

TEST(IbverbsLoader, BogusLibraryIsUnavailableWithDlerrorText) {
  IbverbsLoader l("libibverbs-does-not-exist.so.9");
  EXPECT_FALSE(l.available());
  EXPECT_NE(l.error().find("libibverbs-does-not-exist.so.9"), std::string::npos) << l.error();
  EXPECT_NE(l.error().find("cannot open shared object file"), std::string::npos) << l.error();
  EXPECT_EQ(l.DeviceCount(), 0);
  EXPECT_EQ(l.api().get_device_list, nullptr);
  ibv_port_attr attr{};
  EXPECT_EQ(l.QueryPort(nullptr, 1, &attr), EINVAL);
}

TEST(IbverbsLoader, LibraryLackingRequiredSymbolsIsUnavailableNamingThem) {
  IbverbsLoader l(FF_FAKE_IBVERBS_NO_QP_PATH);
  EXPECT_FALSE(l.available());
  EXPECT_NE(l.error().find("lacks required symbols: ibv_modify_qp, ibv_destroy_qp"), std::string::npos)
      << l.error();
  // A partial table is never exposed: callers cannot reach a half-resolved API.
  EXPECT_EQ(l.api().get_device_list, nullptr);
  EXPECT_EQ(l.DeviceCount(), 0);
}

TEST(IbverbsLoader, CompleteLibraryResolvesEveryRequiredCall) {
  testing::FakeVerbs fake("mlx5_0=AD,rxe0=A");
  const auto& l = fake.loader();
  ASSERT_TRUE(l.available()) << l.error();
  EXPECT_TRUE(l.error().empty());
  const IbvApi& a = l.api();
  for (const void* p :
       {(const void*)a.get_device_list,     (const void*)a.free_device_list, (const void*)a.get_device_name,
        (const void*)a.open_device,         (const void*)a.close_device,     (const void*)a.query_device,
        (const void*)a.query_port_compat,   (const void*)a.query_gid,        (const void*)a.alloc_pd,
        (const void*)a.dealloc_pd,          (const void*)a.reg_mr,           (const void*)a.dereg_mr,
        (const void*)a.create_comp_channel, (const void*)a.create_cq,        (const void*)a.destroy_cq,
        (const void*)a.create_qp,           (const void*)a.modify_qp,        (const void*)a.destroy_qp,
        (const void*)a.get_async_event,     (const void*)a.ack_async_event}) {
    EXPECT_NE(p, nullptr);
  }
  // The fake predates dmabuf: optional calls stay null and do not make the library unavailable.
  EXPECT_EQ(a.reg_dmabuf_mr, nullptr);
  EXPECT_EQ(l.DeviceCount(), 2);
}

TEST(IbverbsLoader, QueryPortOnNonExtendedContextUsesCompatSymbolOnZeroedStruct) {
  testing::FakeVerbs fake("mlx5_0=AI");
  const auto& l = fake.loader();
  ASSERT_TRUE(l.available()) << l.error();
  int n = 0;
  ibv_device** list = l.api().get_device_list(&n);
  ASSERT_EQ(n, 1);
  ibv_context* ctx = l.api().open_device(list[0]);
  ibv_port_attr attr;
  std::memset(&attr, 0xab, sizeof(attr));  // garbage the compat call would not overwrite
  ASSERT_EQ(l.QueryPort(ctx, 2, &attr), 0);
  EXPECT_EQ(attr.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(attr.link_layer, IBV_LINK_LAYER_INFINIBAND);
  EXPECT_EQ(attr.lid, 12);
  EXPECT_EQ(attr.port_cap_flags2, 0u);  // beyond the compat layout: zeroed, not 0xabab
  EXPECT_EQ(l.QueryPort(ctx, 3, &attr), EINVAL);
  l.api().close_device(ctx);
  l.api().free_device_list(list);
  EXPECT_NE(fake.log().find("query_port mlx5_0"), std::string::npos);
}

TEST(IbverbsLoader, ProcessLoaderIsOneInstanceAcrossRacingThreads) {
  std::vector<const IbverbsLoader*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = &IbverbsLoader::Get(); });
  for (auto& t : threads) t.join();
  for (const auto* p : seen) EXPECT_EQ(p, seen[0]);
  // On this machine the real library may or may not be installed; either way the answer is stable
  // and consistent with the file being there.
  const bool installed = std::filesystem::exists("/usr/lib/x86_64-linux-gnu/libibverbs.so.1") ||
                         std::filesystem::exists("/usr/lib64/libibverbs.so.1");
  EXPECT_EQ(seen[0]->available(), installed) << seen[0]->error();
  if (!seen[0]->available()) {
    EXPECT_EQ(seen[0]->DeviceCount(), 0);
  }
}

}  // namespace
}  // namespace ff::verbs
