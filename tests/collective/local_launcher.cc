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

int BenchCompare(const Options& o) {
  char tmpl[] = "/tmp/ff-collective-bench.XXXXXX";
  if (!mkdtemp(tmpl)) throw DriverError(std::string("mkdtemp: ") + std::strerror(errno));
  const std::string dir = tmpl;
  const std::string files[2] = {dir + "/plugin.json", dir + "/raw.json"};
  const Backend backends[2] = {Backend::kPlugin, Backend::kRaw};
  Options quiet = o;
  quiet.json = true;  // keep the ranks' own tables out of the comparison output
  int codes[2];
  nlohmann::json runs[2];
  for (int i = 0; i < 2; ++i) {
    std::fprintf(stderr, "ff-collective: bench-compare: running the sweep with --backend %s\n",
                 BackendName(backends[i]).c_str());
    // Rank 0 also prints JSON to stdout; the comparison reads the file instead.
    std::fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    dup2(devnull, STDOUT_FILENO);
    codes[i] = LaunchLocal(quiet, backends[i], files[i]);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(devnull);
    std::ifstream f(files[i]);
    if (f) runs[i] = nlohmann::json::parse(f, nullptr, false);
    std::filesystem::remove(files[i]);
  }
  std::filesystem::remove(dir);

  nlohmann::json out;
  out["tool"] = "ff-collective bench-compare";
  out["ranks"] = o.nranks;
  out["plugin"] = runs[0];
  out["raw"] = runs[1];
  out["comparison"] = nlohmann::json::array();
  auto results = [](const nlohmann::json& j) {
    return j.is_object() && j.contains("results") ? j["results"] : nlohmann::json::array();
  };
  auto pr = results(runs[0]);
  auto rr = results(runs[1]);
  if (!o.json) {
    std::printf("# ff-collective bench-compare: %d ranks, busbw through the plugin vs raw TCP sockets\n", o.nranks);
    if (runs[0].is_object()) std::printf("# plugin: %s\n", runs[0].value("transport", "?").c_str());
    if (runs[1].is_object()) std::printf("# raw:    %s\n", runs[1].value("transport", "?").c_str());
    std::printf("# %10s %13s %16s %16s %8s\n", "coll", "size(B)", "plugin(GB/s)", "raw(GB/s)", "ratio");
  }
  for (size_t i = 0; i < pr.size() && i < rr.size(); ++i) {
    const double p = pr[i].value("busbw_gbps", 0.0), r = rr[i].value("busbw_gbps", 0.0);
    const double ratio = r > 0 ? p / r : 0.0;
    out["comparison"].push_back({{"coll", pr[i].value("coll", "")},
                                 {"bytes", pr[i].value("bytes", 0)},
                                 {"plugin_busbw_gbps", p},
                                 {"raw_busbw_gbps", r},
                                 {"ratio", ratio}});
    if (!o.json) {
      std::printf("  %10s %13zu %16.3f %16.3f %7.1f%%\n", pr[i].value("coll", "").c_str(),
                  pr[i].value("bytes", size_t{0}), p, r, 100.0 * ratio);
    }
  }
  out["ok"] = codes[0] == 0 && codes[1] == 0;
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  for (int i = 0; i < 2; ++i) {
    if (codes[i] != 0) {
      std::fprintf(stderr, "ff-collective: bench-compare: the %s run failed (exit %d)\n",
                   BackendName(backends[i]).c_str(), codes[i]);
    }
  }
  return codes[0] != 0 ? codes[0] : codes[1];
}

}  // namespace ff::collective
