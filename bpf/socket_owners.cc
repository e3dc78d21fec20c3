// Socket ownership from /proc, and the join of retransmitting sockets with the plugin's tasks and paths.
#include "bpf/socket_owners.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace ff::probe {

namespace {

// "0100007F:1F90" (IPv4) or 32 hex digits + ":PORT" (IPv6), as the kernel prints them: each 32-bit word
// of the address in host order.
bool ParseEndpoint(const std::string& s, bool v6, unsigned char* addr, unsigned short* port) {
  const size_t colon = s.find(':');
  const size_t want = v6 ? 32 : 8;
  if (colon != want) return false;
  for (size_t w = 0; w < want / 8; ++w) {
    const uint32_t v = static_cast<uint32_t>(std::strtoul(s.substr(w * 8, 8).c_str(), nullptr, 16));
    std::memcpy(addr + w * 4, &v, 4);
  }
  *port = static_cast<unsigned short>(std::strtoul(s.c_str() + colon + 1, nullptr, 16));
  return true;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream o;
  o << f.rdbuf();
  return o.str();
}

}  // namespace

std::map<SocketId, unsigned long> ParseProcNetTcp(const std::string& text, bool v6) {
  std::map<SocketId, unsigned long> out;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    if (!(f >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode)) continue;
    ff_sock_key k{};
    k.family = v6 ? AF_INET6 : AF_INET;
    if (!ParseEndpoint(local, v6, k.saddr, &k.sport) || !ParseEndpoint(remote, v6, k.daddr, &k.dport)) continue;
    const unsigned long ino = std::strtoul(inode.c_str(), nullptr, 10);
    if (ino != 0) out[SocketIdFromKey(k)] = ino;
  }
  return out;
}

void ScanSocketOwners(int pid, const std::string& proc_root, std::map<SocketId, int>* owners) {
  const std::string base = proc_root + "/" + std::to_string(pid);
  std::set<unsigned long> inodes;
  if (DIR* d = opendir((base + "/fd").c_str())) {
    while (dirent* e = readdir(d)) {
      char target[64] = {};
      const std::string fd = base + "/fd/" + e->d_name;
      const ssize_t n = readlink(fd.c_str(), target, sizeof(target) - 1);
      if (n > 9 && std::strncmp(target, "socket:[", 8) == 0) inodes.insert(std::strtoul(target + 8, nullptr, 10));
    }
    closedir(d);
  }
  if (inodes.empty()) return;
  for (bool v6 : {false, true})
    for (const auto& [id, ino] : ParseProcNetTcp(ReadAll(base + (v6 ? "/net/tcp6" : "/net/tcp")), v6))
      if (inodes.count(ino)) (*owners)[id] = pid;
}

nlohmann::json JoinRetransmits(const std::map<SocketId, uint64_t>& retransmits, const std::map<SocketId, int>& owners,
                               const std::vector<TimelineEvent>& timeline) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [id, n] : retransmits) {
    nlohmann::json r = {{"local", id.local}, {"remote", id.remote}, {"count", n}};
    auto it = owners.find(id);
    int pid = it != owners.end() ? it->second : 0;
    const TimelineEvent* path = nullptr;
    const TimelineEvent* connect = nullptr;
    std::string task;
    // path_up names the socket itself ("local->remote" connecting, the remote end accepting), so it
    // finds the path even when the process was gone before /proc was read.
    const std::string both = id.local + "->" + id.remote;
    for (const auto& e : timeline) {
      if (e.event != "path_up" || (pid != 0 && e.pid != pid)) continue;
      const std::string ends = e.details.value("ends", std::string());
      if (ends == both || (ends.find("->") == std::string::npos && ends == id.remote)) {
        path = &e;
        break;
      }
    }
    if (path != nullptr) pid = path->pid;
    if (pid == 0) {
      rows.push_back(std::move(r));
      continue;
    }
    for (const auto& e : timeline) {
      if (e.pid != pid) continue;
      if (task.empty() && !e.task.empty()) task = e.task;
      if (connect == nullptr && e.event == "connect" && e.peer == id.remote) connect = &e;
    }
    r["pid"] = pid;
    if (path != nullptr) {
      r["task"] = path->task.empty() ? task : path->task;
      r["peer"] = path->peer;
      r["path"] = path->path;
      r["match"] = "path";
    } else if (connect != nullptr) {
      r["task"] = connect->task.empty() ? task : connect->task;
      r["peer"] = connect->peer;
      r["path"] = -1;
      r["match"] = "peer";
    } else {
      r["task"] = task;
      r["peer"] = "";
      r["path"] = -1;
      r["match"] = "process";
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace ff::probe
