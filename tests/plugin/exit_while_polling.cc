// Process exit while a communicator is still polled: main returns while another thread keeps
// calling isend/irecv/test, as NCCL's proxy thread does when an application exits without
// destroying its communicators. The exit must not crash, and the statistics file must go.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "cli/plugin_loader.h"

namespace {

// Registered before the plugin's first use, so it runs after every exit handler and static
// destructor the plugin registered: a window in which the poller touches whatever they freed.
void LingerAtExit() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

std::atomic<long> g_rounds{0};

// One send and one receive of 4 KiB per round, forever; a failure ends the process with 20+.
void Poll(const ncclNet_v11_t* net, void* sc, void* rc) {
  static char out[4096], in[4096];
  for (;;) {
    void* sreq = nullptr;
    void* rreq = nullptr;
    void* data = in;
    size_t size = sizeof(in);
    int tag = 1;
    void* mh = nullptr;
    while (rreq == nullptr)
      if (net->irecv(rc, 1, &data, &size, &tag, &mh, nullptr, &rreq) != ncclSuccess) std::_Exit(20);
    while (sreq == nullptr)
      if (net->isend(sc, out, sizeof(out), tag, nullptr, nullptr, &sreq) != ncclSuccess) std::_Exit(21);
    int sdone = 0, rdone = 0, sizes[1];
    while (!sdone || !rdone) {
      if (!sdone && net->test(sreq, &sdone, sizes) != ncclSuccess) std::_Exit(22);
      if (!rdone && net->test(rreq, &rdone, sizes) != ncclSuccess) std::_Exit(23);
    }
    g_rounds.fetch_add(1, std::memory_order_relaxed);
  }
}

int RunChild() {
  std::atexit(LingerAtExit);
  auto* lib = new ff::testing::PluginLibrary();  // loaded as NCCL does, never unloaded
  const ncclNet_v11_t* net = lib->V11();
  void* ctx = nullptr;
  ncclNetCommConfig_t cfg{-1};
  if (net->init(&ctx, 1, &cfg, ff::testing::StderrLogger, nullptr) != ncclSuccess) return 10;
  char handle[128];
  void* lc = nullptr;
  if (net->listen(ctx, 0, handle, &lc) != ncclSuccess) return 11;
  void* sc = nullptr;
  void* rc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sc == nullptr || rc == nullptr) {
    if (sc == nullptr && net->connect(ctx, 0, handle, &sc, &dc) != ncclSuccess) return 12;
    if (rc == nullptr && net->accept(lc, &rc, &dc) != ncclSuccess) return 13;
    if (std::chrono::steady_clock::now() > deadline) return 14;
  }
  std::thread(Poll, net, sc, rc).detach();
  while (g_rounds.load() < 100) std::this_thread::yield();
  std::fprintf(stderr, "main returns after %ld rounds; the poller keeps going\n", g_rounds.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "child") == 0) return RunChild();

  char dir[] = "/tmp/ff-exit-stats-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 2;
  ::setenv("FLEXIFORCE_STATS_DIR", dir, 1);
  ::setenv("FLEXIFORCE_STATS_KEEP", "0", 1);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  const pid_t child = ::fork();
  if (child == 0) {
    ::execl("/proc/self/exe", argv[0], "child", static_cast<char*>(nullptr));
    std::_Exit(3);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  int left = 0;
  if (DIR* d = ::opendir(dir)) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') {
        std::fprintf(stderr, "FAIL: %s/%s left after a clean exit\n", dir, e->d_name);
        ++left;
      }
    ::closedir(d);
  }
  std::string cleanup = std::string("rm -rf ") + dir;
  if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "FAIL: the exiting process died of signal %d (%s)\n", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    return 1;
  }
  if (WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "FAIL: the exiting process returned %d\n", WEXITSTATUS(status));
    return 1;
  }
  if (left != 0) return 1;
  std::fprintf(stderr, "ok: exit while polling is clean\n");
  return 0;
}
