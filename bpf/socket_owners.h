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

// One row per retransmitting socket: {local, remote, count}, and where the socket belongs to a plugin
// process, its pid, task and peer, and "path": the path index when known (-1 otherwise), and "match":
//   "accept"  - the socket is the path an accept event named (its "local->remote");
//   "peer"    - its remote end is the peer address a connect event of that process named;
//   "process" - only the process is known (a socket of a plugin process, e.g. the job's bootstrap).
nlohmann::json JoinRetransmits(const std::map<SocketId, uint64_t>& retransmits, const std::map<SocketId, int>& owners,
                               const std::vector<TimelineEvent>& timeline);

}  // namespace ff::probe
