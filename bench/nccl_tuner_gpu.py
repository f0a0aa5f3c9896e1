"""NCCL with and without autotuned's tuner plugin: one mode per process (each
in a fresh process, so that NCCL reads its environment anew), run under
torch.distributed.run on every GPU of the group; bench/nccl_tuner_gpu.sh runs
every mode and bench/nccl_tuner_gpu_report.py compares them.

What is timed: torch.distributed's all_reduce (in place), all_gather_into_tensor
and reduce_scatter_tensor in bf16 on torch's default process group (NCCL,
eager-initialized with device_id), at SIZES: each rank's INPUT bytes, 1 KiB to
256 MiB by a factor of 4 (all_gather's output is world times that,
reduce_scatter's output a world-th of it). Buffers are zeros: NCCL's time does
not depend on the values, and repeated in-place sums stay finite.

Modes (--mode); the process sets NCCL's environment itself before torch loads
NCCL, clearing NCCL_TUNER_PLUGIN, AUTOTUNED_NCCL_TABLE, NCCL_ALGO and
NCCL_PROTO first:
  nccl         NCCL's own choices (no tuner plugin)
  plugin       NCCL_TUNER_PLUGIN=--plugin, AUTOTUNED_NCCL_TABLE=--table
  ring_ll, ring_ll128, ring_simple, tree_ll, tree_ll128, tree_simple
               NCCL_ALGO and NCCL_PROTO forced (no plugin); a combination
               NCCL refuses for a collective is recorded as that cell's error
               (and TORCH_NCCL_ASYNC_ERROR_HANDLING=0: no process ended for it)
Every mode runs with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,ENV: the log
says which tuner NCCL loaded ("TUNER/Plugin: ...") and nothing per call.

Timing, per (collective, size): two eager calls (warmup, and where a refused
combination shows), then a CUDA graph of CALLS calls (CALLS = calls_per_graph
(size): about 1 ms of expected work, 1 to 100, from the size alone so that
every rank captures the same count), one untimed replay, then REPLAYS replays
each between CUDA events after the ranks meet (a gloo barrier) and a spin
kernel that lets the host queue them: graph_us is the median replay / CALLS.
eager_us: REPLAYS blocks of CALLS back-to-back calls, each block between
events, the median block / CALLS (launch costs included). Both are the
maximum over the ranks. The ranks agree after every step (gloo, which no
NCCL setting touches) on whether any rank failed, the lowest failing rank's
error being the cell's, so that all of them skip the same steps (a capture
that failed anywhere is replayed nowhere: a replay waits for its peers').
After a failed cell, a probe (all_to_all_single: NCCL send/recv, which
NCCL_ALGO does not restrict) checks that the communicator still works; if
not, the remaining cells are marked not run.

--probe (modes nccl and plugin): no timing; one eager call per (collective,
size) with NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING, under which NCCL logs, on rank
0, the algorithm, protocol and channels of each call (and the plugin its
table line): what NCCL chose, and what the plugin made it choose. The timed
modes leave TUNING out: it logs every call on rank 0, which would cost rank
0's host time in the eager figures.

Rank 0 writes --out (JSON) after every collective, so that a run cut off
still leaves what it measured: {"mode", "probe", "world", "device", "torch",
"nccl", "date", "env", "sizes", "collectives", "replays", "calls": {size: CALLS},
"times": {collective: {size: {"graph_us", "eager_us"} | {"error"} |
{"eager_us", "graph_error"}}}, "complete", "seconds"}.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

SIZES = [(1 << 10) * 4**i for i in range(10)]  # 1 KiB .. 256 MiB
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter"]
FORCED = {
    "ring_ll": ("Ring", "LL"),
    "ring_ll128": ("Ring", "LL128"),
    "ring_simple": ("Ring", "Simple"),
    "tree_ll": ("Tree", "LL"),
    "tree_ll128": ("Tree", "LL128"),
    "tree_simple": ("Tree", "Simple"),
}
MODES = ["nccl", "plugin", *FORCED]
CLEARED = ["NCCL_TUNER_PLUGIN", "AUTOTUNED_NCCL_TABLE", "NCCL_ALGO", "NCCL_PROTO"]
RECORDED = CLEARED + ["NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_NVLS_ENABLE",
                      "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                      "TORCH_SYMM_MEM_DISABLE_MULTICAST", "CUDA_VISIBLE_DEVICES",
                      "LD_LIBRARY_PATH"]
SUBSYS, PROBE_SUBSYS = "INIT,ENV", "INIT,ENV,TUNING"
REPLAYS = 7
# The count of calls per graph comes from the size alone (every rank must
# capture the same count): a call's expected time is a launch floor plus the
# bytes at a bandwidth within a few times of every collective's here on an
# NVLink host; a graph holds about TARGET_US of it.
TARGET_US, MAX_CALLS, FLOOR_US, BYTES_PER_US = 1000.0, 100, 10.0, 50_000.0
SPIN_CYCLES = 10_000_000  # about 5 ms: the host queues the timed replays meanwhile
ERROR_CHARS = 600


def calls_per_graph(nbytes: int) -> int:
    expected_us = FLOOR_US + nbytes / BYTES_PER_US
    return max(1, min(MAX_CALLS, round(TARGET_US / expected_us)))


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Run under python -m torch.distributed.run --standalone --nproc_per_node=W; "
               "bench/nccl_tuner_gpu.sh runs every mode.")
    p.add_argument("--mode", required=True, choices=MODES)
    p.add_argument("--out", required=True, help="the JSON result (written by rank 0)")
    p.add_argument("--plugin", help="mode plugin: libautotuned_nccl_tuner.so")
    p.add_argument("--table", help="mode plugin: the table file (autotunectl tune-nccl)")
    p.add_argument("--probe", action="store_true",
                   help="no timing: one call per cell with NCCL's per-call TUNING log")
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="each rank's input bytes")
    p.add_argument("--collectives", nargs="+", default=COLLECTIVES, choices=COLLECTIVES)
    p.add_argument("--replays", type=int, default=REPLAYS)
    p.add_argument("--timeout_s", type=int, default=120, help="the process group's timeout")
    args = p.parse_args(argv)
    if args.mode == "plugin":
        for name in ("plugin", "table"):
            path = getattr(args, name)
            if not path or not os.path.isfile(path):
                p.error(f"--{name}: mode plugin needs an existing file (got {path!r})")
    elif args.plugin or args.table:
        p.error("--plugin and --table: only with --mode plugin")
    if args.probe and args.mode not in ("nccl", "plugin"):
        p.error("--probe: only with --mode nccl or plugin")
    bad = [n for n in args.sizes if n < 2 or n % 2]
    if bad:
        p.error(f"--sizes: {bad} not a positive whole number of bf16 elements")
    return args


def mode_env(args: argparse.Namespace) -> dict:
    """NCCL's environment for the mode (set before torch loads NCCL)."""
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": PROBE_SUBSYS if args.probe else SUBSYS}
    if args.mode == "plugin":
        env["NCCL_TUNER_PLUGIN"] = os.path.abspath(args.plugin)
        env["AUTOTUNED_NCCL_TABLE"] = os.path.abspath(args.table)
    elif args.mode in FORCED:
        env["NCCL_ALGO"], env["NCCL_PROTO"] = FORCED[args.mode]
        # A refused combination raises in the call; should NCCL also flag the
        # communicator, torch's watchdog is not to end the process for it
        # (the comm_ok probe marks what could not run).
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    return env


def brief(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:ERROR_CHARS]


class Bench:
    """The group's buffers and one cell's steps; every method is called by
    every rank in the same order."""

    def __init__(self, torch, dist, control, sizes: list) -> None:
        self.torch, self.dist, self.control = torch, dist, control
        self.world = dist.get_world_size()
        elems = max(sizes) // 2
        self.x = torch.zeros(elems, dtype=torch.bfloat16, device="cuda")
        self.y = torch.zeros(elems * self.world, dtype=torch.bfloat16, device="cuda")

    def call(self, collective: str, nbytes: int):
        """The collective on nbytes of each rank's input, as a callable."""
        dist, e = self.dist, nbytes // 2
        x = self.x[:e]
        if collective == "all_reduce":
            return lambda: dist.all_reduce(x)
        if collective == "all_gather":
            y = self.y[:e * self.world]
            return lambda: dist.all_gather_into_tensor(y, x)
        if e % self.world:
            raise ValueError(f"{nbytes} B is not a whole number of bf16 elements per rank "
                             f"for {self.world} ranks")
        y = self.y[:e // self.world]
        return lambda: dist.reduce_scatter_tensor(y, x)

    def agree(self, err):
        """Every rank's error (a string or None) in, the same answer out on
        every rank: the lowest failing rank's error, or None."""
        errs: list = [None] * self.world
        self.dist.all_gather_object(errs, err, group=self.control)
        return next((f"rank {r}: {e}" for r, e in enumerate(errs) if e is not None), None)

    def max_over_ranks(self, values: list) -> list:
        t = self.torch.tensor(values, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.control)
        return t.tolist()

    def meet(self) -> None:
        self.torch.cuda.synchronize()
        self.dist.barrier(group=self.control)

    def comm_ok(self) -> bool:
        """NCCL still answers (send/recv, which NCCL_ALGO does not restrict)."""
        torch, ok = self.torch, True
        try:
            src = torch.full((self.world,), float(self.dist.get_rank()), device="cuda")
            dst = torch.empty_like(src)
            self.dist.all_to_all_single(dst, src)
            torch.cuda.synchronize()
            ok = dst.tolist() == [float(r) for r in range(self.world)]
        except Exception:  # noqa: BLE001 - the answer is the boolean
            ok = False
        return self.agree(None if ok else "no answer") is None

    def warm(self, collective: str, nbytes: int, times: int):
        """(the callable, None) after `times` eager calls, or (None, error)
        on every rank when any rank failed."""
        fn, err = None, None
        try:
            fn = self.call(collective, nbytes)
            for _ in range(times):
                fn()
            self.torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - recorded as the cell's error
            err = brief(e)
        err = self.agree(err)
        return (None, err) if err else (fn, None)

    def capture(self, fn, calls: int):
        torch = self.torch
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.graph(g, stream=side):
            for _ in range(calls):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        return g

    def timed(self, launch, calls: int, replays: int, spin: bool) -> float:
        """The median over `replays` of launch()'s time between events / calls (us)."""
        torch = self.torch
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
        self.meet()
        if spin:
            torch.cuda._sleep(SPIN_CYCLES)
        ev[0].record()
        for i in range(replays):
            launch()
            ev[i + 1].record()
        torch.cuda.synchronize()
        return statistics.median(ev[i].elapsed_time(ev[i + 1]) * 1000 / calls
                                 for i in range(replays))

    def cell(self, collective: str, nbytes: int, replays: int) -> dict:
        calls = calls_per_graph(nbytes)
        fn, err = self.warm(collective, nbytes, 2)
        if err:
            return {"error": "eager: " + err}
        graph, graph_err = None, None
        try:
            graph = self.capture(fn, calls)
        except Exception as e:  # noqa: BLE001 - recorded; the eager figure still runs
            graph_err = brief(e)
        # Agreed before any replay: a replay waits for every rank's replay.
        graph_err = self.agree(graph_err)
        if graph_err:
            graph = None
        graph_us = -1.0
        if graph is not None:
            graph.replay()
            graph_us = self.timed(graph.replay, calls, replays, True)
        del graph

        def eager_block():
            for _ in range(calls):
                fn()

        eager_us = self.timed(eager_block, calls, replays, False)
        graph_us, eager_us = self.max_over_ranks([graph_us, eager_us])
        if graph_err:
            return {"eager_us": eager_us, "graph_error": "capture: " + graph_err}
        return {"graph_us": graph_us, "eager_us": eager_us}


def run(bench: Bench, args: argparse.Namespace, result: dict, write) -> None:
    broken = None
    for collective in args.collectives:
        cells = result["times"].setdefault(collective, {})
        for n in args.sizes:
            if broken:
                cells[str(n)] = {"error": "not run: " + broken}
                continue
            if args.probe:
                _, err = bench.warm(collective, n, 1)
                cells[str(n)] = {"error": err} if err else {"ok": True}
            else:
                cells[str(n)] = bench.cell(collective, n, args.replays)
            if "error" in cells[str(n)] and not bench.comm_ok():
                broken = (f"NCCL stopped answering after {collective} at {n} B: "
                          f"{cells[str(n)]['error']}")[:ERROR_CHARS]
        write()


def main(argv=None) -> int:
    args = parse(argv)
    for k in CLEARED:
        os.environ.pop(k, None)
    os.environ.update(mode_env(args))
    import torch
    import torch.distributed as dist

    t0 = time.monotonic()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    timeout = datetime.timedelta(seconds=args.timeout_s)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local), timeout=timeout)
    try:
        control = dist.new_group(backend="gloo", timeout=timeout)
        bench = Bench(torch, dist, control, args.sizes)
        nccl = torch.cuda.nccl.version()
        result: dict = {
            "mode": args.mode, "probe": args.probe, "world": dist.get_world_size(),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "nccl": ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "env": {k: os.environ[k] for k in RECORDED if k in os.environ},
            "sizes": args.sizes, "collectives": args.collectives, "replays": args.replays,
            "calls": {str(n): calls_per_graph(n) for n in args.sizes},
            "times": {}, "complete": False}

        def write() -> None:
            if dist.get_rank() == 0:
                result["seconds"] = round(time.monotonic() - t0, 1)
                with open(args.out + ".tmp", "w") as f:
                    json.dump(result, f, indent=1)
                os.replace(args.out + ".tmp", args.out)

        run(bench, args, result, write)
        result["complete"] = True
        write()
        if dist.get_rank() == 0:
            print(json.dumps(result["times"]), flush=True)
        dist.barrier(group=control)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
