// Harness for conformance tests: a second process, a pipe for the listen handle, and a v11 peer.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>

#include "cli/plugin_loader.h"

namespace ff::testing {

// One process' use of the plugin through the v11 table, as NCCL's proxy would.
class NetPeer {
 public:
  NetPeer() : lib_(std::make_unique<PluginLibrary>()), net_(lib_->V11()) {
    ncclNetCommConfig_t cfg{-1};
    if (net_->init(&ctx_, 1, &cfg, StderrLogger, nullptr) != ncclSuccess) throw std::runtime_error("init failed");
  }
  ~NetPeer() { net_->finalize(ctx_); }
  const ncclNet_v11_t* net() const { return net_; }
  void* ctx() const { return ctx_; }

  void* Listen(char handle[128], int dev = 0) {
    void* lc = nullptr;
    if (net_->listen(ctx_, dev, handle, &lc) != ncclSuccess) throw std::runtime_error("listen failed");
    return lc;
  }
  // Non-blocking connect/accept loops with a deadline, as NCCL runs them.
  void* Connect(char handle[128], int dev = 0) {
    void* sc = nullptr;
    ncclNetDeviceHandle_t* dc = nullptr;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (sc == nullptr) {
      if (net_->connect(ctx_, dev, handle, &sc, &dc) != ncclSuccess) throw std::runtime_error("connect failed");
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("connect timed out");
    }
    return sc;
  }
  void* Accept(void* lc) {
    void* rc = nullptr;
    ncclNetDeviceHandle_t* dc = nullptr;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (rc == nullptr) {
      if (net_->accept(lc, &rc, &dc) != ncclSuccess) throw std::runtime_error("accept failed");
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("accept timed out");
    }
    return rc;
  }
  // Tests until done or error; returns the test() result.
  ncclResult_t Wait(void* req, int* sizes = nullptr, int timeout_s = 60) {
    int done = 0;
    int dummy[8];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!done) {
      ncclResult_t r = net_->test(req, &done, sizes ? sizes : dummy);
      if (r != ncclSuccess) return r;
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("test() timed out");
    }
    return ncclSuccess;
  }

 private:
  std::unique_ptr<PluginLibrary> lib_;
  const ncclNet_v11_t* net_;
  void* ctx_ = nullptr;
};

// Runs `child` in a forked process given the read end of a pipe; the parent gets the write end.
// The child's exit code is 0 when its checks passed.
class ChildProcess {
 public:
  explicit ChildProcess(const std::function<int(int rfd, int wfd)>& child) {
    int a[2], b[2];
    if (pipe(a) != 0 || pipe(b) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      close(a[1]);
      close(b[0]);
      int rc = 1;
      try {
        rc = child(a[0], b[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        rc = 3;
      }
      _exit(rc);
    }
    close(a[0]);
    close(b[1]);
    to_child_ = a[1];
    from_child_ = b[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(to_child_);
    close(from_child_);
  }
  int to_child() const { return to_child_; }
  int from_child() const { return from_child_; }
  pid_t pid() const { return pid_; }
  int Wait() {
    int st = 0;
    waitpid(pid_, &st, 0);
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  // Wait() bounded: -1 if the child is still running after `timeout_ms` (it is then left running).
  int WaitFor(int timeout_ms) {
    for (int waited = 0;; waited += 5) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (r < 0 || waited >= timeout_ms) return -1;
      usleep(5000);
    }
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  bool reaped_ = false;
};

inline void WriteAll(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) throw std::runtime_error("pipe write");
    c += w;
    n -= static_cast<size_t>(w);
  }
}
inline void ReadAll(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) throw std::runtime_error("pipe read");
    c += r;
    n -= static_cast<size_t>(r);
  }
}

// Deterministic content: word k of message `seq` is a mix of both; byte i is byte i%8 of word i/8.
inline uint64_t PatternWord(uint64_t seq, uint64_t k) {
  return (seq + 1) * 0x9E3779B97F4A7C15ull ^ k * 0xC2B2AE3D27D4EB4Full;
}
inline void FillPattern(char* buf, uint64_t seq, uint64_t n) {
  for (uint64_t k = 0; k * 8 < n; ++k) {
    uint64_t x = PatternWord(seq, k);
    std::memcpy(buf + 8 * k, &x, std::min<uint64_t>(8, n - 8 * k));
  }
}
// Returns the first mismatching index or -1.
inline int64_t CheckPattern(const char* buf, uint64_t seq, uint64_t n) {
  for (uint64_t k = 0; k * 8 < n; ++k) {
    uint64_t x = PatternWord(seq, k);
    uint64_t len = std::min<uint64_t>(8, n - 8 * k);
    if (std::memcmp(buf + 8 * k, &x, len) != 0) {
      for (uint64_t i = 0; i < len; ++i)
        if (buf[8 * k + i] != reinterpret_cast<const char*>(&x)[i]) return static_cast<int64_t>(8 * k + i);
    }
  }
  return -1;
}

}  // namespace ff::testing
