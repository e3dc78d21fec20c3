#!/usr/bin/env python3
"""Example training job: PyTorch DDP on synthetic data, NCCL's inter-host traffic through FlexiForce.

The job declares itself to the plugin before torch.distributed is initialised:
  AI_SLA_LATENCY=50 (microseconds), AI_TASK_ID, AI_FLEXIFORCE_ENABLE=1, NCCL_NET_PLUGIN=flexiforce.
Check what the plugin makes of them first: build/bin/flexiforce config

One host (one process per GPU; NCCL uses NVLink/shared memory between them unless told not to):
  export LD_LIBRARY_PATH=$PWD/build/lib:$LD_LIBRARY_PATH
  torchrun --standalone --nproc-per-node=2 examples/train.py --steps 100
  # to force the traffic through the plugin on one host, give each rank its own NCCL_HOSTID:
  #   examples/gpu-e2e.sh does that without PyTorch.

Two hosts (node A at 10.0.0.1 is the rendezvous; run on both, --node-rank 0 on A, 1 on B):
  export LD_LIBRARY_PATH=/path/to/flexiforce/build/lib:$LD_LIBRARY_PATH
  export NCCL_SOCKET_IFNAME=eth0,eth1        # the data interfaces (NCCL's syntax)
  torchrun --nnodes=2 --nproc-per-node=8 --node-rank=0 --rdzv-id=llama-run3 \
           --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 examples/train.py --steps 1000
  # NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET shows the plugin's task, SLA level and paths;
  # build/bin/flexiforce stats on either host shows bytes per task and collective while it runs.

Options: --steps N, --batch B, --width W, --sla US, --task-id ID, --observe (AI_FLEXIFORCE_ENABLE=0),
--cpu (gloo backend, no GPU, no NCCL: checks the loop only).
"""
import argparse
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch DDP training on synthetic data with NCCL through the FlexiForce plugin; "
                    "launch with torchrun (see the header of this file for one and two hosts).")
    p.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step (default 64)")
    p.add_argument("--width", type=int, default=4096, help="hidden width of the model (default 4096)")
    p.add_argument("--sla", default="50", help="AI_SLA_LATENCY for the job, microseconds (default 50)")
    p.add_argument("--task-id", default=None,
                   help="AI_TASK_ID (default: torchrun's --rdzv-id, else 'train-py-example')")
    p.add_argument("--observe", action="store_true", help="AI_FLEXIFORCE_ENABLE=0: observe only, steer nothing")
    p.add_argument("--cpu", action="store_true", help="gloo backend on CPU (no NCCL, no plugin)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch < 1 or args.width < 1:
        p.error("--steps, --batch and --width must be positive integers")
    return args


def declare_job(args):
    """What the plugin reads at NCCL init; must be set before torch.distributed.init_process_group."""
    os.environ["AI_SLA_LATENCY"] = args.sla
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    os.environ["AI_TASK_ID"] = args.task_id or (run_id if run_id != "none" else "train-py-example")
    os.environ["AI_FLEXIFORCE_ENABLE"] = "0" if args.observe else "1"
    os.environ["NCCL_NET_PLUGIN"] = "flexiforce"


def import_torch():
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError as e:
        sys.exit(f"examples/train.py: PyTorch is not installed ({e}); install torch with CUDA support "
                 "(https://pytorch.org/get-started/) and launch with torchrun. "
                 "`python3 examples/train.py --help` works without it.")
    return torch


def main(argv=None):
    args = parse_args(argv)
    declare_job(args)
    torch = import_torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    if "RANK" not in os.environ:
        sys.exit("examples/train.py: RANK/WORLD_SIZE are not set; launch with torchrun "
                 "(e.g. torchrun --standalone --nproc-per-node=2 examples/train.py)")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        if not torch.cuda.is_available():
            sys.exit("examples/train.py: no CUDA device visible; use --cpu to check the loop without NCCL")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1234)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
        torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
        torch.nn.Linear(args.width, 10)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator(device="cpu").manual_seed(rank)  # synthetic data, different per rank

    if rank == 0:
        print(f"train.py: {world} ranks, task {os.environ['AI_TASK_ID']}, AI_SLA_LATENCY="
              f"{os.environ['AI_SLA_LATENCY']} us, AI_FLEXIFORCE_ENABLE={os.environ['AI_FLEXIFORCE_ENABLE']}",
              flush=True)
    start = time.time()
    for step in range(args.steps):
        x = torch.randn(args.batch, args.width, generator=gen).to(device)
        y = torch.randint(0, 10, (args.batch,), generator=gen).to(device)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradients here: the traffic the plugin carries
        opt.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:5d}  loss {loss.item():.4f}", flush=True)

    # Every rank must hold the same weights after DDP; a wrong all-reduce would show here.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    if not torch.equal(flat, ref):
        sys.exit(f"examples/train.py: rank {rank} weights differ from rank 0 after training")
    if rank == 0:
        print(f"train.py: {args.steps} steps in {time.time() - start:.1f} s, weights identical on all ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
