// Turns one ring collective into the ordered list of sends to the next rank and receives from the previous.
#pragma once

#include <cstddef>
#include <vector>

#include "nccl/net_abi.h"

namespace ff::collective {

enum class Buffer { kSend, kRecv };

// Sends go in list order; send i may start only once receive `after_recv` completed
// (the data it forwards arrived), -1 when it depends on nothing.
struct SendStep {
  Buffer buffer;
  size_t offset;  // bytes
  size_t bytes;
  int after_recv;
};

// Receives complete into the receive buffer at `offset`; a reducing receive lands in a
// staging slot first and is then summed with the send buffer's element at the same offset.
struct RecvStep {
  size_t offset;
  size_t bytes;
  bool reduce;
};

struct RingSchedule {
  std::vector<SendStep> sends;
  std::vector<RecvStep> recvs;
  // Local copy of send buffer into receive buffer before the ring starts (AllGather's own
  // block, Broadcast's root): offsets in bytes; bytes == 0 means none.
  size_t local_copy_src = 0;
  size_t local_copy_dst = 0;
  size_t local_copy_bytes = 0;
};

// `count` is the per-rank element count as nccl-tests defines it: AllReduce and Broadcast
// move `count` elements, AllGather gathers `count` elements from every rank.
// step_bytes is the pipelining granularity; it is rounded down to whole elements.
RingSchedule BuildSchedule(NcclFunc func, int rank, int nranks, int root, size_t count, size_t elem_size,
                           size_t step_bytes);

// Byte sizes of the two buffers the schedule addresses.
size_t SendBufferBytes(NcclFunc func, int nranks, size_t count, size_t elem_size);
size_t RecvBufferBytes(NcclFunc func, int nranks, size_t count, size_t elem_size);

}  // namespace ff::collective
