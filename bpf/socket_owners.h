// Which plugin process a TCP socket belongs to, and the task and peer it carries: the join of the
// probe's per-socket retransmit counts with the plugin's paths.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpf/probe_snapshot.h"

namespace ff::probe {

// Parses /proc/<pid>/net/tcp (v6 = false) or tcp6: socket 4-tuple -> inode.
std::map<SocketId, unsigned long> ParseProcNetTcp(const std::string& text, bool v6);

// Adds every TCP socket that process `pid` holds open (its fds' inodes, found in its network
// namespace's /proc/<pid>/net/tcp{,6}) to `owners` as 4-tuple -> pid. Quietly skips a process that is gone.
void ScanSocketOwners(int pid, const std::string& proc_root, std::map<SocketId, int>* owners);

// One row per retransmitting socket: {local, remote, count}, and where it belongs to a plugin process,
// its pid, task, peer, path (index, -1 when unknown) and "match", how it was found:
//   "path"    - a path_up event of that process named this socket (connecting side: "local->remote";
//               accepting side: its remote end); found even without `owners`;
//   "peer"    - owned by the process (`owners`, from /proc) and its remote end is the peer a connect
//               event of that process named (a path socket whose index is not known);
//   "process" - only owned by the process (e.g. the job's bootstrap socket, not a plugin path).
nlohmann::json JoinRetransmits(const std::map<SocketId, uint64_t>& retransmits, const std::map<SocketId, int>& owners,
                               const std::vector<TimelineEvent>& timeline);

}  // namespace ff::probe
