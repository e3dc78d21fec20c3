// Each older ABI table (v8, v9, v10) and the newest (v12) carries one exchange end to end.
#include "tests/plugin/two_process.h"

namespace ff::testing {
namespace {

// Generic exchange driven through a table whose entry points differ only in signatures.
template <typename Net, typename Init, typename Listen, typename Connect, typename Isend, typename Irecv>
void ExchangeThrough(const char* version, Init init, Listen listen, Connect connect, Isend isend, Irecv irecv,
                     const Net* (PluginLibrary::*get)() const) {
  constexpr size_t kBytes = 3 << 20;
  ChildProcess child([&](int, int w) {
    PluginLibrary lib;
    const Net* net = (lib.*get)();
    if (init(net) != ncclSuccess) return 60;
    char handle[128];
    void* lc = nullptr;
    if (listen(net, handle, &lc) != ncclSuccess) return 61;
    WriteAll(w, handle, sizeof(handle));
    void* rc = nullptr;
    ncclNetDeviceHandle_t* dc = nullptr;
    while (rc == nullptr)
      if (net->accept(lc, &rc, &dc) != ncclSuccess) return 62;
    std::vector<char> buf(kBytes + 10);
    void* req = nullptr;
    while (req == nullptr)
      if (irecv(net, rc, buf.data(), buf.size(), &req) != ncclSuccess) return 63;
    int done = 0, size = 0;
    while (!done)
      if (net->test(req, &done, &size) != ncclSuccess) return 64;
    if (static_cast<size_t>(size) != kBytes || CheckPattern(buf.data(), 77, kBytes) >= 0) return 65;
    net->closeRecv(rc);
    net->closeListen(lc);
    return 0;
  });
  PluginLibrary lib;
  const Net* net = (lib.*get)();
  ASSERT_EQ(init(net), ncclSuccess) << version;
  char handle[128];
  ReadAll(child.from_child(), handle, sizeof(handle));
  void* sc = nullptr;
  while (sc == nullptr) ASSERT_EQ(connect(net, handle, &sc), ncclSuccess) << version;
  std::vector<char> buf(kBytes);
  FillPattern(buf.data(), 77, kBytes);
  void* req = nullptr;
  while (req == nullptr) ASSERT_EQ(isend(net, sc, buf.data(), kBytes, &req), ncclSuccess);
  int done = 0, size = 0;
  ncclResult_t tr = ncclSuccess;
  while (!done && tr == ncclSuccess) tr = net->test(req, &done, &size);
  EXPECT_EQ(tr, ncclSuccess) << version;
  EXPECT_EQ(static_cast<size_t>(size), kBytes);
  net->closeSend(sc);
  EXPECT_EQ(child.Wait(), 0) << version;
}

TEST(LegacyTables, V8IntSizedTableCarriesAMessage) {
  using N = ncclNet_v8_t;
  ExchangeThrough<N>(
      "v8", [](const N* n) { return n->init(StderrLogger); },
      [](const N* n, char* h, void** lc) { return n->listen(0, h, lc); },
      [](const N* n, char* h, void** sc) {
        ncclNetDeviceHandle_t* dc;
        return n->connect(0, h, sc, &dc);
      },
      [](const N* n, void* sc, void* d, size_t s, void** r) { return n->isend(sc, d, static_cast<int>(s), 0, nullptr, r); },
      [](const N* n, void* rc, void* d, size_t s, void** r) {
        int sz = static_cast<int>(s), tag = 0;
        return n->irecv(rc, 1, &d, &sz, &tag, nullptr, r);
      },
      &PluginLibrary::V8);
}

TEST(LegacyTables, V9SizeTTableCarriesAMessage) {
  using N = ncclNet_v9_t;
  ExchangeThrough<N>(
      "v9", [](const N* n) { return n->init(StderrLogger); },
      [](const N* n, char* h, void** lc) { return n->listen(0, h, lc); },
      [](const N* n, char* h, void** sc) {
        ncclNetDeviceHandle_t* dc;
        return n->connect(0, h, sc, &dc);
      },
      [](const N* n, void* sc, void* d, size_t s, void** r) { return n->isend(sc, d, s, 0, nullptr, r); },
      [](const N* n, void* rc, void* d, size_t s, void** r) {
        int tag = 0;
        return n->irecv(rc, 1, &d, &s, &tag, nullptr, r);
      },
      &PluginLibrary::V9);
}

TEST(LegacyTables, V10ConfigTableCarriesAMessage) {
  using N = ncclNet_v10_t;
  ExchangeThrough<N>(
      "v10", [](const N* n) { return n->init(StderrLogger, nullptr); },
      [](const N* n, char* h, void** lc) { return n->listen(0, h, lc); },
      [](const N* n, char* h, void** sc) {
        ncclNetDeviceHandle_t* dc;
        ncclNetCommConfig_t cfg{-1};
        return n->connect(0, &cfg, h, sc, &dc);
      },
      [](const N* n, void* sc, void* d, size_t s, void** r) { return n->isend(sc, d, s, 0, nullptr, nullptr, r); },
      [](const N* n, void* rc, void* d, size_t s, void** r) {
        int tag = 0;
        return n->irecv(rc, 1, &d, &s, &tag, nullptr, nullptr, r);
      },
      &PluginLibrary::V10);
}

TEST(LegacyTables, V12TableCarriesAMessageAndReportsRailIds) {
  using N = ncclNet_v12_t;
  static void* ctx = nullptr;
  ExchangeThrough<N>(
      "v12",
      [](const N* n) {
        ncclNetCommConfig_t cfg{-1};
        return n->init(&ctx, 9, &cfg, StderrLogger, nullptr);
      },
      [](const N* n, char* h, void** lc) { return n->listen(ctx, 0, h, lc); },
      [](const N* n, char* h, void** sc) {
        ncclNetDeviceHandle_t* dc;
        return n->connect(ctx, 0, h, sc, &dc);
      },
      [](const N* n, void* sc, void* d, size_t s, void** r) { return n->isend(sc, d, s, 0, nullptr, nullptr, r); },
      [](const N* n, void* rc, void* d, size_t s, void** r) {
        int tag = 0;
        return n->irecv(rc, 1, &d, &s, &tag, nullptr, nullptr, r);
      },
      &PluginLibrary::V12);
  PluginLibrary lib;
  ncclNetCommConfig_t cfg{-1};
  void* c2 = nullptr;
  ASSERT_EQ(lib.V12()->init(&c2, 10, &cfg, StderrLogger, nullptr), ncclSuccess);
  ncclNetProperties_v12_t p{};
  ASSERT_EQ(lib.V12()->getProperties(0, &p), ncclSuccess);
  EXPECT_EQ(p.railId, -1);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_GE(p.maxRecvs, 8);
  EXPECT_NE(p.name, nullptr);
  EXPECT_EQ(lib.V12()->finalize(c2), ncclSuccess);
}

}  // namespace
}  // namespace ff::testing
