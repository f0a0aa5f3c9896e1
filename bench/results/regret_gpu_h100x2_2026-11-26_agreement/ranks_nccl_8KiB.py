"""The ranks' ncclAllReduce at 8 KiB bf16 under a CUDA graph of 25 calls
(bench/nccl_direct.py), the median of 7 replays, rank 0's figure; run as
ranks_nccl_8KiB_env.txt says, one NCCL setting per process."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "src", "bench"))
from nccl_direct import NcclDirect  # noqa: E402

CALLS, REPLAYS = 25, 7


def main() -> None:
    dist.init_process_group("nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    direct = NcclDirect()
    x = torch.ones(4096, dtype=torch.bfloat16, device="cuda")
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            direct.all_reduce(x)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(CALLS):
            direct.all_reduce(x)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200000)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / CALLS)
    if rank == 0:
        print("ranks direct 8KiB graph us", sorted(times)[REPLAYS // 2], flush=True)
    torch.cuda.synchronize()
    dist.barrier()
    direct.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
