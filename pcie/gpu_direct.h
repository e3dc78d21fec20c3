// GPUDirect RDMA's kernel side: whether a NIC can pin GPU memory by address. That takes the
// nvidia-peermem module (the older out-of-tree one is nv_peer_mem); without it NCCL moves GPU
// buffers through host memory, unless the NIC registers DMA-BUFs (the verbs backend asks the device).
#pragma once

#include <string>

namespace ff::pcie {

// The peer-memory module loaded under `sys_dir` ("/sys" on a host, a fixture's sys/ in tests):
// "nvidia_peermem", "nv_peer_mem", or "" when neither is. Either module also shows itself as
// kernel/mm/memory_peers/nv_mem/version; the module directories are checked first.
std::string PeerMemModule(const std::string& sys_dir);

}  // namespace ff::pcie
