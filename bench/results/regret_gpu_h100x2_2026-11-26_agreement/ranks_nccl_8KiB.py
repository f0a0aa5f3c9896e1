import os, sys, torch, torch.distributed as dist
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "src", "bench"))
from nccl_direct import NcclDirect
dist.init_process_group("nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
r = dist.get_rank(); torch.cuda.set_device(r)
d = NcclDirect()
x = torch.ones(4096, dtype=torch.bfloat16, device="cuda")
g = torch.cuda.CUDAGraph(); s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3): d.all_reduce(x)
torch.cuda.synchronize()
with torch.cuda.graph(g, stream=s):
    for _ in range(25): d.all_reduce(x)
g.replay(); torch.cuda.synchronize()
out=[]
for _ in range(7):
    a=torch.cuda.Event(enable_timing=True); b=torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200000); a.record(); g.replay(); b.record(); b.synchronize(); out.append(a.elapsed_time(b)*1000/25)
if r == 0: print("ranks direct 8KiB graph us", sorted(out)[3], flush=True)
torch.cuda.synchronize(); dist.barrier(); d.close(); dist.destroy_process_group()
