"""Where NCCL's cost under CUDA graphs comes from in a rank process: the same
bf16 ncclAllReduce captured and replayed several ways in each of the ranks
(torchrun), to set beside the daemon's worker (bench/nccl_agreement_gpu.sh).

  torch      torch.distributed.all_reduce captured by torch.cuda.graph on a
             side stream, as a PyTorch caller captures
  direct     ncclAllReduce through ctypes on bench/nccl_direct.py's
             communicator (the libnccl torch loaded), captured by
             torch.cuda.graph
  raw        the same call captured as the daemon's worker captures it:
             cudart's cudaStreamBeginCapture (thread-local) on a stream of
             its own, cudaGraphInstantiate with no flags, cudaGraphLaunch

Every way (also: replayed on the capture's stream, `_side`; on the legacy
default stream, `_legacy`; out of place, `_oop`): `calls` collectives per
graph, 3 untimed replays, then a spin kernel and 20 replays with an event
after each; the figure is the median replay over `calls`, the
max over ranks. One line per way and size on rank 0.

    torchrun --nproc_per_node=2 bench/nccl_graph_probe.py [--calls 1,16,64] [--bytes 8192,1048576]
"""
import argparse
import ctypes
import os
import statistics

import torch
import torch.distributed as dist

from nccl_direct import NcclDirect

REPLAYS = 20
SPIN_CYCLES = 200_000  # queued ahead of the timed replays, as autotuned.rankrun does


def cudart():
    """The libcudart torch loaded (by soname), else the wheel's."""
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    import nvidia.cuda_runtime
    return ctypes.CDLL(os.path.join(nvidia.cuda_runtime.__path__[0], "lib", "libcudart.so.13"))


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: {rc}")


def median_per_call(evs, calls):
    times = [evs[i].elapsed_time(evs[i + 1]) * 1000.0 / calls for i in range(1, REPLAYS)]
    return statistics.median(times)


def captured(calls_once):
    """torch.cuda.graph of calls_once() on a side stream, as a PyTorch
    caller captures."""
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=side):
        calls_once()
    torch.cuda.synchronize()
    return g, side


def torch_timed(replay, calls):
    """3 untimed replays, a spin, REPLAYS replays between events, all on the
    current stream: the median per call (us)."""
    for _ in range(3):
        replay()
    torch.cuda.synchronize()
    evs = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS + 1)]
    torch.cuda._sleep(SPIN_CYCLES)
    evs[0].record()
    for i in range(REPLAYS):
        replay()
        evs[i + 1].record()
    torch.cuda.synchronize()
    return median_per_call(evs, calls)


def way_torch(x, calls, replay_on_side=False):
    def body():
        for _ in range(calls):
            dist.all_reduce(x)
    g, side = captured(body)
    if replay_on_side:
        with torch.cuda.stream(side):
            return torch_timed(g.replay, calls)
    return torch_timed(g.replay, calls)


def way_direct(direct, x, calls, y=None):
    def body():
        s = torch.cuda.current_stream().cuda_stream
        for _ in range(calls):
            direct.call(x, x if y is None else y, s)
    g, _ = captured(body)
    return torch_timed(g.replay, calls)


def way_raw(direct, rt, x, calls, mode=1, flags=0, legacy=False, y=None):
    stream = ctypes.c_void_p()
    check(rt.cudaStreamCreateWithFlags(ctypes.byref(stream), 1), "cudaStreamCreateWithFlags")
    check(rt.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")
    for _ in range(calls):
        direct.call(x, x if y is None else y, stream.value)
    graph = ctypes.c_void_p()
    check(rt.cudaStreamEndCapture(stream, ctypes.byref(graph)), "cudaStreamEndCapture")
    exe = ctypes.c_void_p()
    check(rt.cudaGraphInstantiate(ctypes.byref(exe), graph, ctypes.c_ulonglong(flags)),
          "cudaGraphInstantiate")
    ext = torch.cuda.ExternalStream(stream.value)
    if legacy:  # replays on the legacy default stream
        stream = ctypes.c_void_p(0)
        ext = torch.cuda.default_stream()

    def replay():
        check(rt.cudaGraphLaunch(exe, stream), "cudaGraphLaunch")

    with torch.cuda.stream(ext):
        return torch_timed(replay, calls)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", default="1,16,64")
    p.add_argument("--bytes", default="8192,1048576")
    a = p.parse_args()
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    direct, rt = NcclDirect(), cudart()
    for nbytes in [int(b) for b in a.bytes.split(",")]:
        x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        y = torch.empty_like(x)
        dist.all_reduce(x)  # connect
        torch.cuda.synchronize()
        for calls in [int(c) for c in a.calls.split(",")]:
            ways = (("torch", way_torch, (x, calls), {}),
                    ("direct", way_direct, (direct, x, calls), {}),
                    ("raw", way_raw, (direct, rt, x, calls), {}),
                    ("torch_side", way_torch, (x, calls), {"replay_on_side": True}),
                    ("raw_legacy", way_raw, (direct, rt, x, calls), {"legacy": True}),
                    ("direct_oop", way_direct, (direct, x, calls), {"y": y}),
                    ("raw_leg_oop", way_raw, (direct, rt, x, calls), {"legacy": True, "y": y}))
            for name, way, args, kwargs in ways:
                try:
                    us = way(*args, **kwargs)
                except Exception as e:  # noqa: BLE001 - reported, the next way runs
                    us = float("nan")
                    print(f"rank {rank} {name}: {e}", flush=True)
                t = torch.tensor([us], device="cuda")
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                if rank == 0:
                    print(f"{name:12s} bytes {nbytes:9d} calls {calls:3d}  {t.item():8.2f} us",
                          flush=True)
    direct.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
