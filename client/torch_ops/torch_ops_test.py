"""libautotuned_torch_ops.so without a GPU: loading it registers the ops'
schemas (the Python backend's, string for string) with their CUDA kernel in
C++; fake shapes through FakeTensorMode, make_fx and torch.compile; groups
handed to the C++ side and taken back; the C++ kernel's errors (reached by
redispatching to the CUDA key with CPU tensors, before any CUDA call) and
its NCCL path on a 1-rank gloo group; the Python backend where the library
is absent. Run by //client/torch_ops:torch_ops_test (AUTOTUNED_TORCH_OPS_LIB
and AUTOTUNED_KERNELS_LIB set to the built libraries). The launches
themselves need GPUs: torch_ops_gpu_test.py.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python", "tests"))
from timeout_guard import guard  # noqa: E402

import autotuned.kernels as K  # noqa: E402
from autotuned import ops  # noqa: E402
from autotuned.p2p import P2PGroup  # noqa: E402

CUDA = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
OPS = ("all_reduce", "all_gather", "reduce_scatter")


@pytest.fixture(autouse=True)
def deadline():
    with guard(240):
        yield


@pytest.fixture(scope="module")
def gloo():
    """A 1-rank gloo world: the NCCL implementations' path runs on it on CPU."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD


def _cuda(op, *args):
    """The op's CUDA kernel (the C++ one) called with CPU tensors."""
    return getattr(torch.ops.autotuned, op).default.redispatch(CUDA, *args)


def _python_backend(env_value: str) -> str:
    """Schemas, backend and a CPU call in a fresh process whose
    AUTOTUNED_TORCH_OPS_LIB is env_value."""
    code = (
        "import torch, autotuned.kernels as K\n"
        "from autotuned import ops\n"
        "print(ops.backend())\n"
        "for n in ('all_reduce', 'all_gather', 'reduce_scatter'):\n"
        "    print(getattr(torch.ops.autotuned, n).default._schema)\n")
    env = dict(os.environ, AUTOTUNED_TORCH_OPS_LIB=env_value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


class _Group:
    """A group the ops find that is no P2PGroup (its NCCL implementations only)."""

    def __init__(self, world: int, process_group=None) -> None:
        self.world = world
        self.process_group = process_group


def _fake_p2p(name: str, world: int = 2, max_bytes: int = 1024) -> P2PGroup:
    """A P2PGroup as construction leaves it, without CUDA: peer pointers
    that are never dereferenced (no launch runs), the real kernels
    library's functions."""
    g = object.__new__(P2PGroup)
    g.lib = K.load_library()
    g.process_group = None
    g.world, g.rank, g.device = world, 0, torch.device("cuda", 0)
    g.name, g.spin_limit = name, 0
    g.max_bytes, g.push_max_bytes, g.ce_max_bytes = max_bytes, max_bytes // 2, 0
    g.scratch_bytes, g.push_bytes = 4096, 2048
    arr = ctypes.c_void_p * world
    g._peer_signals = arr(*[0x10000 * (r + 1) for r in range(world)])
    g._peer_scratch = arr(*[0x20000 * (r + 1) for r in range(world)])
    g._peer_push = arr(*[0x30000 * (r + 1) for r in range(world)])
    g._peer_inputs = arr(*[0x40000 * (r + 1) for r in range(world)])
    g._closed = False
    return g


def test_loading_registers_the_schemas_of_the_python_ops():
    assert ops.backend() == "cpp"
    assert ops.torch_ops_library() == os.environ["AUTOTUNED_TORCH_OPS_LIB"]
    lines = _python_backend("none").splitlines()
    assert lines[0] == "python"
    for op, python_schema in zip(OPS, lines[1:]):
        assert str(getattr(torch.ops.autotuned, op).default._schema) == python_schema
        assert torch.Tag.pt2_compliant_tag in getattr(torch.ops.autotuned, op).default.tags
        dump = torch._C._dispatch_dump(f"autotuned::{op}")
        cuda = [line for line in dump.splitlines() if line.startswith("CUDA:")]
        assert cuda and "client/torch_ops/ops.cc" in cuda[0], dump


def test_absent_library_keeps_the_python_ops(tmp_path):
    missing = str(tmp_path / "libautotuned_torch_ops.so")
    lines = _python_backend(missing).splitlines()
    assert lines[0] == "python"
    assert lines[1].startswith("autotuned::all_reduce(Tensor x, str impl")


def test_a_library_that_does_not_load_is_an_error(tmp_path):
    bad = tmp_path / "libautotuned_torch_ops.so"
    bad.write_bytes(b"not an ELF file")
    env = dict(os.environ, AUTOTUNED_TORCH_OPS_LIB=str(bad))
    out = subprocess.run([sys.executable, "-c", "import torch, autotuned.kernels"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert f"cannot load {bad}" in out.stderr and "AUTOTUNED_TORCH_OPS_LIB=none" in out.stderr


def test_fake_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    K.register_group("fake4", _Group(4), default=False)
    try:
        with FakeTensorMode():
            x = torch.empty(8, 3, dtype=torch.bfloat16)
            assert torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", "fake4").shape == (8, 3)
            assert torch.ops.autotuned.all_gather(x, "all_gather/p2p", "fake4").shape == (32, 3)
            y = torch.ops.autotuned.reduce_scatter(x, "reduce_scatter/p2p", "fake4")
            assert y.shape == (2, 3) and y.dtype == torch.bfloat16
    finally:
        K.unregister_group("fake4", K.get_group("fake4"))


def test_make_fx_and_compile_through_the_ops(gloo):
    from torch.fx.experimental.proxy_tensor import make_fx

    K.register_group("w1", _Group(1, gloo), default=False)
    try:
        def f(x):
            y = torch.ops.autotuned.all_reduce(x * 2, "all_reduce/nccl", "w1")
            z = torch.ops.autotuned.all_gather(y, "all_gather/nccl", "w1")
            return torch.ops.autotuned.reduce_scatter(z + 1, "reduce_scatter/nccl", "w1")

        gm = make_fx(f, tracing_mode="fake")(torch.ones(4, 3))
        targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        assert "autotuned.all_gather.default" in targets
        x = torch.arange(12.0).reshape(4, 3)
        for backend in ("aot_eager", "inductor"):  # Inductor: a fallback kernel of the op
            compiled = torch.compile(f, backend=backend, fullgraph=True)
            assert torch.equal(compiled(x), x * 2 + 1), backend
    finally:
        K.unregister_group("w1", K.get_group("w1"))


def test_groups_registered_and_unregistered():
    g = _fake_p2p("p2p:a")
    K.register_group(g.name, g)
    try:
        assert "p2p:a" in torch.ops.autotuned._group_names()
        other = _Group(2)
        K.register_group("nccl:b", other, default=False)
        assert torch.ops.autotuned._group_names()[-2:] == ["p2p:a", "nccl:b"]
        K.unregister_group("nccl:b", _Group(2))  # not the one registered: nothing happens
        assert "nccl:b" in torch.ops.autotuned._group_names()
        K.unregister_group("nccl:b", other)
        assert "nccl:b" not in torch.ops.autotuned._group_names()
        # "" is the default group: p2p:a, a P2P group on cuda:0.
        with pytest.raises(RuntimeError, match=r"tensors on cpu, the group is on cuda:0"):
            _cuda("all_reduce", torch.ones(4), "all_reduce/one_shot", "")
    finally:
        K.unregister_group(g.name, g)
    assert "p2p:a" not in torch.ops.autotuned._group_names()
    with pytest.raises(RuntimeError, match=r"no P2PGroup named 'p2p:a'"):
        _cuda("all_reduce", torch.ones(4), "all_reduce/one_shot", "p2p:a")
    with pytest.raises(RuntimeError, match=r"no P2PGroup: make one"):
        _cuda("all_reduce", torch.ones(4), "all_reduce/one_shot", "")


def test_errors_of_the_cpp_kernels():
    g = _fake_p2p("p2p:e", max_bytes=1024)
    K.register_group(g.name, g, default=False)
    try:
        x = torch.ones(16)
        with pytest.raises(RuntimeError, match=r"implementation 'all_reduce/nope' does not run "
                                               r"in-process \(known: all_reduce/nccl, "):
            _cuda("all_reduce", x, "all_reduce/nope", g.name)
        with pytest.raises(RuntimeError, match=r"implementation 'all_gather/p2p' is an "
                                               r"all_gather, not an all_reduce"):
            _cuda("all_reduce", x, "all_gather/p2p", g.name)
        with pytest.raises(RuntimeError, match=r"op 'avg': one of sum, max, min"):
            _cuda("all_reduce", x, "all_reduce/one_shot", g.name, 0, 0, 0, "avg")
        with pytest.raises(RuntimeError, match=r"dtype Long: the P2P kernels take float32"):
            _cuda("all_reduce", torch.ones(16, dtype=torch.int64), "all_reduce/one_shot", g.name)
        with pytest.raises(RuntimeError, match=r"P2PGroup p2p:e: 1028 bytes > 1024, the largest "
                                               r"all_reduce/two_shot runs on in this group "
                                               r"\(max_bytes\)"):
            _cuda("all_reduce", torch.ones(257), "all_reduce/two_shot", g.name)
        # The push one-shot's own limit (push_max_bytes = 512 here).
        with pytest.raises(RuntimeError, match=r"516 bytes > 512, the largest "
                                               r"all_reduce/one_shot_push .*\(push_max_bytes\)"):
            _cuda("all_reduce", torch.ones(258, dtype=torch.bfloat16),
                  "all_reduce/one_shot_push", g.name)
        with pytest.raises(RuntimeError, match=r"P2PGroup p2p:e: tensors on cpu, the group is "
                                               r"on cuda:0"):
            _cuda("all_reduce", x, "all_reduce/one_shot", g.name)
        with pytest.raises(RuntimeError, match=r"tensors on cpu"):
            _cuda("all_gather", x, "all_gather/p2p", g.name)
        with pytest.raises(RuntimeError, match=r"reduce_scatter: dim 0 \(3\) is not a multiple "
                                               r"of the world size 2"):
            _cuda("reduce_scatter", torch.ones(3), "reduce_scatter/p2p", g.name)
        # A group without P2P buffers runs only the NCCL implementations, and
        # those only on a process group c10d knows by name.
        K.register_group("nccl:c", _Group(2, object()), default=False)
        with pytest.raises(RuntimeError, match=r"group 'nccl:c' has no P2P buffers: "
                                               r"all_reduce/one_shot cannot run in it"):
            _cuda("all_reduce", x, "all_reduce/one_shot", "nccl:c")
        with pytest.raises(RuntimeError, match=r"group 'nccl:c' has no process group name"):
            _cuda("all_reduce", x, "all_reduce/nccl", "nccl:c")
        K.unregister_group("nccl:c", K.get_group("nccl:c"))
    finally:
        K.unregister_group(g.name, g)


def test_registration_checks_the_kernels_abi():
    g = _fake_p2p("p2p:abi")
    state = g.torch_ops_state()
    state["args_size"] += 8
    with pytest.raises(RuntimeError, match=r"sizeof\(at_p2p_args\) is \d+ in the kernels "
                                           r"library but \d+ in the torch ops"):
        torch.ops.autotuned._register_group(name="p2p:abi", is_default=False, **state)
    state = g.torch_ops_state()
    state["abi_version"] += 10000
    with pytest.raises(RuntimeError, match=r"ABI version"):
        torch.ops.autotuned._register_group(name="p2p:abi", is_default=False, **state)
    assert "p2p:abi" not in torch.ops.autotuned._group_names()


def test_nccl_path_of_the_cpp_kernels(gloo):
    K.register_group("w1c", _Group(1, gloo), default=False)
    try:
        x = torch.arange(6.0).reshape(3, 2)
        assert torch.equal(_cuda("all_reduce", x, "all_reduce/nccl", "w1c"), x)
        assert torch.equal(_cuda("all_gather", x, "all_gather/nccl", "w1c"), x)
        assert torch.equal(_cuda("reduce_scatter", x, "reduce_scatter/nccl", "w1c", 0, 0, "max"), x)
        y = _cuda("all_reduce", torch.tensor(2.5), "all_reduce/nccl", "w1c")
        assert y.shape == () and y.item() == 2.5
    finally:
        K.unregister_group("w1c", K.get_group("w1c"))


def test_groups_registered_before_the_ops_are_handed_over():
    code = (
        "import torch\n"
        "from autotuned import ops\n"
        "class G:\n"
        "    world = 2\n"
        "    process_group = None\n"
        "ops.register_group('early', G())\n"
        "ops.register_ops()\n"
        "print(ops.backend(), torch.ops.autotuned._group_names())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cpp ['early']"
