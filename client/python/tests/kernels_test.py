"""autotuned.kernels' library part, no GPU needed: libautotuned_kernels_abi.so
opened with ctypes (cudart inside it starts only on a CUDA call), its ABI
checked against the ctypes mirror, and at_p2p_check_args' pure host
validation driven through that mirror, so a field out of place shows up as a
valid launch rejected or an invalid one accepted. Skips where the library
cannot be opened here.
"""
from __future__ import annotations

import ctypes
import os
import sys

import pytest

import autotuned.kernels as K


@pytest.fixture(scope="module")
def lib() -> K.Library:
    path = os.environ.get(K.LIB_ENV)
    if not path:
        pytest.skip(f"${K.LIB_ENV} not set (the BUILD rule sets it)")
    try:
        return K.load_library(path)
    except K.KernelsError as e:
        if "cannot load" in str(e):
            pytest.skip(f"library not loadable here: {e}")
        raise


def test_version_struct_size_and_limits(lib):
    assert lib.version // 10000 == K.ABI_MAJOR
    assert lib.lib.at_p2p_args_size() == ctypes.sizeof(K.AtP2PArgs)
    # The C layout on LP64: 4 ints, then 8-byte fields, then the root (an
    # int padded to 8).
    assert K.AtP2PArgs.count.offset == 16
    assert K.AtP2PArgs.spin_limit.offset + 8 == K.AtP2PArgs.root.offset == 88
    assert ctypes.sizeof(K.AtP2PArgs) == 96
    lim = lib.limits
    assert (lim.min_world, lim.max_world, lim.max_blocks, lim.max_threads) == (2, 8, 132, 1024)
    assert (lim.alignment, lim.signal_alignment, lim.pipeline_depth) == (16, 128, 2)
    assert lim.signal_bytes == lib.signal_bytes > 0
    assert lib.algo_name(K.ALGO_ALL_REDUCE_ONE_SHOT) == "all_reduce_one_shot"
    assert lib.algo_name(K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH) == "all_reduce_two_shot_push"
    assert lib.algo_name(K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH) == "all_reduce_one_shot_push"
    assert lib.algo_name(K.ALGO_ALL_TO_ALL) == "all_to_all"
    assert lib.algo_name(K.ALGO_BROADCAST) == "broadcast"
    assert lib.algo_name(K.ALGO_ALL_REDUCE_PUSH_PIPELINED) == "all_reduce_push_pipelined"
    assert lib.algo_name(K.ALGO_BROADCAST_PUSH_PIPELINED) == "broadcast_push_pipelined"
    assert lib.algo_name(K.ALGO_ALL_REDUCE_RING) == "all_reduce_ring"
    assert lib.algo_name(K.ALGO_ALL_REDUCE_CE_RING) == "all_reduce_ce_ring"
    for impl in K.IMPLEMENTATIONS.values():  # every algo the module launches is the library's
        assert impl.algo == 0 or lib.algo_name(impl.algo), impl.name
    assert lib.algo_name(99) is None
    assert lib.error_string(0)


def _args(lib, algo=K.ALGO_ALL_REDUCE_ONE_SHOT, count=1000, scratch=0, **over):
    """Valid arguments at made-up, suitably aligned addresses (never touched)."""
    keep = []

    def arr(*ptrs):
        a = (ctypes.c_void_p * len(ptrs))(*ptrs)
        keep.append(a)
        return ctypes.cast(a, ctypes.POINTER(ctypes.c_void_p))

    a = K.AtP2PArgs()
    a.world, a.rank, a.dtype, a.op, a.count = 2, 1, K.DTYPE_FLOAT32, K.OP_SUM, count
    a.peer_inputs = arr(over.pop("in0", 0x10000000), 0x20000000)
    a.output = 0x30000000
    if scratch:
        a.peer_scratch = arr(0x40000000, 0x50000000)
        a.scratch_bytes = scratch
    a.peer_signals = arr(0x60000000, 0x70000000)
    a.blocks, a.threads = 32, 512
    for k, v in over.items():
        setattr(a, k, v)
    a._keep = keep
    return a


def test_check_args_through_the_mirror(lib):
    assert lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib)) is None
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib, blocks=0))
    assert reason and "block" in reason
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib, threads=100))
    assert reason and "thread" in reason
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib, in0=0x10000004))
    assert reason and "align" in reason
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib, rank=2))
    assert reason and "rank" in reason
    # Two-shot: the scratch capacity the library asks for is enough, less is not.
    need = lib.scratch_bytes(K.ALGO_ALL_REDUCE_TWO_SHOT, K.DTYPE_FLOAT32, 2, 1000)
    assert need > 0
    assert lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT, _args(lib, scratch=need)) is None
    reason = lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT, _args(lib, scratch=need - 16))
    assert reason and "scratch" in reason
    # The push two-shot: `world` slices of scratch, so the pull one's is too little.
    push = lib.scratch_bytes(K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH, K.DTYPE_FLOAT32, 2, 1000)
    assert push == 2 * need
    assert lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH, _args(lib, scratch=push)) is None
    reason = lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH, _args(lib, scratch=need))
    assert reason and f"scratch_bytes {need} < {push} needed" in reason
    reason = lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH, _args(lib))
    assert reason and "scratch" in reason
    # The chunked two-shot reads chunk_elems (the field after threads).
    need = lib.scratch_bytes(K.ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, K.DTYPE_FLOAT32, 2,
                             1 << 20, 4096)
    assert lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
                          _args(lib, count=1 << 20, scratch=need, chunk_elems=4096)) is None
    reason = lib.check_args(K.ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
                            _args(lib, count=1 << 20, scratch=need, chunk_elems=3))
    assert reason and "chunk" in reason
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib, spin_limit=-1))
    assert reason and "spin" in reason
    # The push one-shot: 16-bit types, its own buffer of 3 x world slots.
    one_push = lib.scratch_bytes(K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH, K.DTYPE_BFLOAT16, 2, 1000)
    assert one_push == 640 + 3 * 2 * 2000  # a header of 640 bytes, 3 x world slots
    assert lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                          _args(lib, scratch=one_push, dtype=K.DTYPE_BFLOAT16)) is None
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                            _args(lib, scratch=one_push, dtype=K.DTYPE_FLOAT32))
    assert reason and "bfloat16 and float16 only" in reason
    reason = lib.check_args(K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                            _args(lib, scratch=one_push - 1, dtype=K.DTYPE_FLOAT16))
    assert reason and "scratch_bytes" in reason


def test_scratch_bytes(lib):
    assert lib.scratch_bytes(K.ALGO_ALL_REDUCE_ONE_SHOT, K.DTYPE_FLOAT32, 2, 1000) == 0
    assert lib.scratch_bytes(K.ALGO_ALL_REDUCE_TWO_SHOT, K.DTYPE_BFLOAT16, 2, 1 << 20) >= 1 << 20
    assert lib.scratch_bytes(K.ALGO_ALL_REDUCE_TWO_SHOT, K.DTYPE_FLOAT32, 9, 1000) == -1
    assert lib.scratch_bytes(K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH, K.DTYPE_BFLOAT16, 4, 1 << 20) == \
        4 * (1 << 18) * 2


def test_group_sizes(lib):
    """A P2PGroup's buffers as the library sizes them: the two-shots' and the
    chunked kernels' largest need in either dtype, the push buffer only when
    asked for."""
    scratch, push = lib.group_sizes(4, 1 << 20, 2 << 20, 0, 0)
    need = max(lib.scratch_bytes(a, d, 4, (1 << 20) // size, (2 << 20) // size)
               for a in (K.ALGO_ALL_REDUCE_TWO_SHOT, K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
                         K.ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, K.ALGO_ALL_REDUCE_PUSH_PIPELINED,
                         K.ALGO_BROADCAST_PUSH_PIPELINED)
               for d, size in ((K.DTYPE_FLOAT32, 4), (K.DTYPE_BFLOAT16, 2)))
    assert scratch == -(-need // 256) * 256 and push == 0
    _, push = lib.group_sizes(4, 1 << 20, 2 << 20, 0, 1 << 20)
    assert push >= lib.scratch_bytes(K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH, K.DTYPE_BFLOAT16, 4,
                                     1 << 19)
    with pytest.raises(K.KernelsError, match=r"at_p2p_group_sizes_for\(world 9"):
        lib.group_sizes(9, 1 << 20, 0, 0, 0)


def test_scratch_init_checks_before_any_cuda_call(lib):
    init = lib.lib.at_p2p_scratch_init
    push = K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH
    big = lib.scratch_bytes(push, K.DTYPE_BFLOAT16, 2, 1000)
    assert init(99, ctypes.c_void_p(0x10000000), big, None) == 1       # unknown algo
    assert init(push, None, big, None) == 1                            # no buffer
    assert init(push, ctypes.c_void_p(0x10000008), big, None) == 1    # not 16-byte aligned
    assert init(push, ctypes.c_void_p(0x10000000), 640, None) == 1    # the header alone
    # The other algos' scratch needs no preparation: nothing to do, no CUDA call.
    assert init(K.ALGO_ALL_REDUCE_TWO_SHOT, ctypes.c_void_p(0x10000000), big, None) == 0


def test_launch_of_rejected_arguments_raises_with_the_reason(lib):
    # Rejected before any CUDA call, so this needs no GPU.
    with pytest.raises(K.KernelsError, match="block"):
        lib.launch(K.ALGO_ALL_REDUCE_ONE_SHOT, _args(lib, blocks=0), 0)


def test_all_to_all_v_checks_through_the_mirror(lib):
    if lib.version < K.ALL_TO_ALL_V_VERSION:
        pytest.skip(f"library ABI {lib.version}: no all_to_all_v")
    assert lib.algo_name(K.ALGO_ALL_TO_ALL_V) == "all_to_all_v"
    # Rank 1 of 2 receives 3 from rank 0 and nothing from itself; it sends 4
    # to rank 0. count is ignored.
    splits = [0, 3, 4, 0]
    assert lib.check_all_to_all_v(_args(lib, count=-1), splits) is None
    reason = lib.check_all_to_all_v(_args(lib), [0, 3, -4, 0])
    assert reason and "split_counts[2] (rank 1 to rank 0) is negative: -4" in reason
    reason = lib.check_all_to_all_v(_args(lib, threads=100), splits)
    assert reason and "threads 100" in reason
    reason = lib.check_all_to_all_v(_args(lib, in0=0x10000004), splits)
    assert reason and "peer_inputs[0] not 16-byte aligned" in reason
    # The output may not overlap this rank's input (4 fp32 elements at 0x20000000).
    reason = lib.check_all_to_all_v(_args(lib, output=0x20000000), splits)
    assert reason and "cannot run in place" in reason
    # A matrix of zeros needs no pointer; the matrix must be world x world.
    assert lib.check_all_to_all_v(_args(lib, output=0x20000000), [0] * 4) is None
    with pytest.raises(K.KernelsError, match="split_counts has 3 entries, world 2 needs 4"):
        lib.check_all_to_all_v(_args(lib), [1, 2, 3])
    # Rejected before any CUDA call; at_p2p_launch takes no matrix.
    with pytest.raises(K.KernelsError, match="blocks 0"):
        lib.all_to_all_v(_args(lib, blocks=0), splits, 0)
    with pytest.raises(K.KernelsError, match="at_p2p_all_to_all_v"):
        lib.launch(K.ALGO_ALL_TO_ALL_V, _args(lib), 0)


def test_abi_mismatch_is_a_clear_error():
    with pytest.raises(K.KernelsError, match=r"sizeof\(at_p2p_args\) is 88 in the library but 96"):
        K.check_abi(20000, 88, "lib.so")
    with pytest.raises(K.KernelsError, match="major 1"):
        K.check_abi(10200, 96, "lib.so")
    K.check_abi(20003, 96)


def test_missing_and_foreign_libraries(tmp_path):
    missing = str(tmp_path / "nope.so")
    with pytest.raises(K.KernelsError, match=r"not found \(tried: .*nope.so\)"):
        K.load_library(missing)
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6",
                             "/lib64/libm.so.6") if os.path.exists(p)), None)
    if libm:
        with pytest.raises(K.KernelsError, match="no symbol at_kernels_version"):
            K.load_library(libm)


def test_library_search_order(monkeypatch):
    monkeypatch.setenv(K.LIB_ENV, "/from/env.so")
    assert K.library_candidates("/given.so") == ["/given.so"]
    order = K.library_candidates()
    assert order[0] == "/from/env.so"
    assert order[1].endswith(os.path.join("autotuned", K.LIB_NAME))


def test_specs_and_implementations():
    c = K.parse_spec("all_reduce/one_shot:blocks=16,threads=256")
    assert (c.impl, c.blocks, c.threads, c.chunk_kib) == ("all_reduce/one_shot", 16, 256, 0)
    assert K.parse_spec("all_reduce/two_shot_chunked:chunk_kib=64").chunk_kib == 64
    with pytest.raises(K.KernelsError, match="unknown parameters"):
        K.parse_spec("all_reduce/one_shot:warps=2")
    with pytest.raises(K.KernelsError, match="not name=int"):
        K.parse_spec("all_reduce/one_shot:blocks")
    # NCCL's own choice, as the daemon names it, runs as torch.distributed's
    # NCCL; a forced algorithm is the tuner plugin's, not the runner's.
    assert K.parse_spec("all_reduce/nccl:algo=0,channels=0,proto=0").impl == "all_reduce/nccl"
    with pytest.raises(K.KernelsError, match="tuner plugin"):
        K.parse_spec("all_reduce/nccl:algo=2,channels=0,proto=1")
    assert K.implementation("all_reduce/two_shot").algo == K.ALGO_ALL_REDUCE_TWO_SHOT
    push = K.implementation("all_reduce/two_shot_push", "all_reduce")
    assert (push.algo, push.blocks, push.threads) == (K.ALGO_ALL_REDUCE_TWO_SHOT_PUSH, 32, 512)
    assert K.implementation("all_reduce/one_shot_push").algo == K.ALGO_ALL_REDUCE_ONE_SHOT_PUSH
    assert K.implementation("reduce_scatter/p2p", "reduce_scatter").algo == K.ALGO_REDUCE_SCATTER
    with pytest.raises(K.KernelsError, match="does not run in-process"):
        K.implementation("all_reduce/ring")
    with pytest.raises(K.KernelsError, match="is an all_reduce, not an all_gather"):
        K.implementation("all_reduce/one_shot", "all_gather")


def test_nearest_winner_matches_the_log_scale_rule():
    import math

    from autotuned.dispatch import nearest_winner
    from autotuned.vllm import nearest_winner as vllm_nearest_winner

    assert vllm_nearest_winner is nearest_winner  # still importable from its old home
    counts = [256, 1024, 4096, 1 << 16, 3 << 16]
    winners = [0, 1, 2, 1, 0]

    def by_logs(n):
        n = max(1, n)
        if n <= counts[0]:
            return winners[0]
        if n > counts[-1]:
            return winners[-1]
        i = next(i for i, c in enumerate(counts) if c >= n)
        lo, hi = counts[i - 1], counts[i]
        return winners[i - 1] if math.log(n / lo) <= math.log(hi / n) else winners[i]

    for n in list(range(0, 5000)) + [65535, 65536, 65537, 113511, 113512, 1 << 20]:
        assert nearest_winner(counts, winners, n) == by_logs(n), n


def _package_imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at any depth of its code
    (function-level imports included): "autotuned" is the package itself."""
    import ast

    here = os.path.dirname(os.path.abspath(K.__file__))
    graph: dict[str, set[str]] = {}
    for f in sorted(os.listdir(here)):
        if not f.endswith(".py"):
            continue
        name = "autotuned" if f == "__init__.py" else f"autotuned.{f[:-3]}"
        deps = graph.setdefault(name, set())
        with open(os.path.join(here, f)) as src:
            tree = ast.parse(src.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for n in names:
                if n == "autotuned" or n.startswith("autotuned."):
                    top = ".".join(n.split(".")[:2])
                    if not top.startswith("autotuned._proto"):
                        deps.add(top)
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def test_package_imports_have_no_cycle():
    graph = _package_imports()
    assert {"autotuned.kernels", "autotuned.dispatch", "autotuned.vllm"} <= set(graph)
    # The kernels side stands without the gRPC one (and without vllm).
    assert not graph["autotuned.dispatch"] & {"autotuned", "autotuned.vllm", "autotuned.client"}
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, "import cycle: " + " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
