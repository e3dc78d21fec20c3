// Fork/exec of ranks with an inherited rendezvous socket, supervision with bounded waits, and bench comparison.
#include "tests/collective/local_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/collective/rank_runner.h"
#include "tests/collective/report.h"
#include "tests/collective/tcp_socket.h"

namespace ff::collective {
namespace {

// How long survivors get to notice a failed rank and exit on their own before being killed.
constexpr double kGraceSeconds = 20.0;

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw DriverError("cannot resolve /proc/self/exe: " + ec.message());
  return p.string();
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "ended abnormally";
}

int CodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return kExitError;
}

}  // namespace

int LaunchLocal(const Options& o, Backend backend, const std::string& result_file) {
  const std::string ip = o.bind_ip.empty() ? "127.0.0.1" : o.bind_ip;
  UniqueFd listener = ListenTcp(ip, 0, o.nranks + 8);
  const std::string rendezvous = ip + ":" + std::to_string(LocalPort(listener.Get()));
  const std::string exe = SelfExe();

  std::map<pid_t, int> running;  // pid -> rank
  for (int r = 0; r < o.nranks; ++r) {
    auto args = RankArguments(o, r, o.nranks, rendezvous, r == 0 ? listener.Get() : -1, backend, result_file);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw DriverError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      // A rank must not outlive its launcher (e.g. when ctest kills the launcher on timeout).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (r == 0) fcntl(listener.Get(), F_SETFD, 0);  // rank 0 inherits the listening socket
      execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "ff-collective: exec %s failed: %s\n", exe.c_str(), std::strerror(errno));
      _exit(127);
    }
    running[pid] = r;
  }
  listener.Reset();

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto hard_limit = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o.timeout_s + kGraceSeconds));
  bool kill_armed = false;
  bool killed_all = false;
  Clock::time_point kill_at = hard_limit;
  int result = kExitOk;
  int first_failed_rank = -1;
  while (!running.empty()) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      auto it = running.find(pid);
      if (it == running.end()) continue;
      const int rank = it->second;
      running.erase(it);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::fprintf(stderr, "ff-collective: launcher: rank %d %s\n", rank, DescribeStatus(status).c_str());
        if (result == kExitOk) {
          result = CodeOf(status);
          first_failed_rank = rank;
          kill_armed = true;
          kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kGraceSeconds));
        }
      }
      continue;
    }
    const auto now = Clock::now();
    if (!killed_all && ((kill_armed && now >= kill_at) || now >= hard_limit)) {
      for (auto& [p, r] : running) {
        std::fprintf(stderr, "ff-collective: launcher: rank %d still running %s; killing it\n", r,
                     kill_armed ? ("after rank " + std::to_string(first_failed_rank) + " failed").c_str()
                             : "past --timeout-s");
        kill(p, SIGKILL);
      }
      if (result == kExitOk) result = kExitError;
      killed_all = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

// Runs one sweep point through one backend with rank 0's JSON going to a file; returns the exit code.
static int RunQuietly(const Options& o, Backend backend, const std::string& file, nlohmann::json* report) {
  // Rank 0 also prints JSON to stdout; the comparison reads the file instead.
  std::fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  dup2(devnull, STDOUT_FILENO);
  int code = LaunchLocal(o, backend, file);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  close(devnull);
  std::ifstream f(file);
  *report = f ? nlohmann::json::parse(f, nullptr, false) : nlohmann::json();
  std::filesystem::remove(file);
  return code;
}

int BenchCompare(const Options& o) {
  char tmpl[] = "/tmp/ff-collective-bench.XXXXXX";
  if (!mkdtemp(tmpl)) throw DriverError(std::string("mkdtemp: ") + std::strerror(errno));
  const std::string dir = tmpl;
  const Backend backends[2] = {Backend::kPlugin, Backend::kRaw};

  nlohmann::json out;
  out["tool"] = "ff-collective bench-compare";
  out["ranks"] = o.nranks;
  out["comparison"] = nlohmann::json::array();
  int result = kExitOk;
  bool header = false;
  // Sizes alternate between the backends (plugin, raw, next size ...) so that a change in
  // machine load hits both sides of a ratio alike instead of one whole sweep.
  for (auto coll : o.colls) {
    for (size_t b = o.min_bytes; b <= o.max_bytes; b *= 2) {
      Options point = o;
      point.json = true;
      point.colls = {coll};
      point.min_bytes = point.max_bytes = b;
      nlohmann::json runs[2];
      for (int i = 0; i < 2; ++i) {
        int code = RunQuietly(point, backends[i], dir + "/" + BackendName(backends[i]) + ".json", &runs[i]);
        if (code != kExitOk) {
          std::fprintf(stderr, "ff-collective: bench-compare: %s %zu B with --backend %s failed (exit %d)\n",
                       CollName(coll).c_str(), b, BackendName(backends[i]).c_str(), code);
          if (result == kExitOk) result = code;
        }
      }
      auto first = [](const nlohmann::json& j) {
        return j.is_object() && j.contains("results") && !j["results"].empty() ? j["results"][0] : nlohmann::json();
      };
      const auto pr = first(runs[0]), rr = first(runs[1]);
      if (!o.json && !header) {
        header = true;
        std::printf("# ff-collective bench-compare: %d ranks, busbw through the plugin vs raw TCP sockets\n", o.nranks);
        std::printf("# plugin: %s\n", runs[0].is_object() ? runs[0].value("transport", "?").c_str() : "(failed)");
        std::printf("# raw:    %s\n", runs[1].is_object() ? runs[1].value("transport", "?").c_str() : "(failed)");
        std::printf("# %10s %13s %13s %13s %13s %8s\n", "coll", "size(B)", "plugin(us)", "plugin(GB/s)", "raw(GB/s)",
                    "ratio");
      }
      const double p = pr.is_object() ? pr.value("busbw_gbps", 0.0) : 0.0;
      const double r = rr.is_object() ? rr.value("busbw_gbps", 0.0) : 0.0;
      const double ratio = r > 0 ? p / r : 0.0;
      const size_t bytes = pr.is_object() ? pr.value("bytes", size_t{0}) : b;
      out["comparison"].push_back({{"coll", CollName(coll)},
                                   {"bytes", bytes},
                                   {"plugin", pr},
                                   {"raw", rr},
                                   {"plugin_busbw_gbps", p},
                                   {"raw_busbw_gbps", r},
                                   {"ratio", ratio}});
      if (!o.json) {
        std::printf("  %10s %13zu %13.1f %13.3f %13.3f %7.1f%%\n", CollName(coll).c_str(), bytes,
                    pr.is_object() ? pr.value("time_us", 0.0) : 0.0, p, r, 100.0 * ratio);
        std::fflush(stdout);
      }
    }
  }
  std::filesystem::remove(dir);
  out["ok"] = result == kExitOk;
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  return result;
}

}  // namespace ff::collective
