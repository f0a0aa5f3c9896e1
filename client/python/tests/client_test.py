"""The Python client against a live daemon on the sim backend (4 virtual GPUs)."""
from __future__ import annotations

import os
import sys
import threading
import time

import pytest

import autotuned
from autotuned import Client, pb, problem
from autotuned.errors import DeadlineExceeded, InvalidArgument, Unavailable

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import Daemon  # noqa: E402
from timeout_guard import guard  # noqa: E402

CANDIDATES = ["all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/ring:chunk_kib=64"]
FAST = pb.Options(warmup=1, iterations=3)


@pytest.fixture(autouse=True)
def deadline():
    with guard(120):
        yield


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(config_text='sim { gpus: 4 faults { name: "all_reduce/hangs" '
                           'base: "all_reduce/ring" kind: HANG rank: 1 } }')
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    with Client(daemon.target, connect_timeout=10, measure_timeout=60) as c:
        yield c


def test_node_info_and_list(client):
    info = client.node_info()
    assert info.backend == "sim"
    assert len(info.gpus) == 4
    impls = client.list_implementations("all_reduce")
    names = {i.name for i in impls.implementations}
    assert {"all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/ring"} <= names
    assert all(i.collective == pb.ALL_REDUCE for i in impls.implementations)


def test_tune_then_cached(client):
    p = problem("all_reduce", "float32", count=64 * 1024, candidates=CANDIDATES, label="ar")
    group = autotuned.whole_node_group(4, "py-client")
    first = client.tune([p], group=group, options=FAST)
    r = first.results[0]
    assert r.status == pb.TUNED
    assert r.winner in {c.split(":")[0] for c in CANDIDATES}
    assert len(r.ranked) == 3 and all(c.ok for c in r.ranked)
    # The winner first (within the margin it may be the default, not the
    # lower median: docs/protocol.md "How a decision is made"), then the
    # rest by the ranking's estimate (paired ratios once later passes run,
    # which a median alone does not give), each candidate once.
    assert r.ranked[0].candidate.impl == r.winner
    assert sorted(c.index for c in r.ranked) == [0, 1, 2]
    assert len(r.ranked[0].rank_mean_us) == 4
    assert r.problem.label == "ar"
    again = client.tune([p], group=group, options=FAST)
    assert again.results[0].status == pb.CACHED
    assert again.results[0].winner == r.winner
    assert any(e.winner == r.winner for e in client.list_cache().entries)


def test_sweep_streams_sizes_then_table(client):
    request = pb.SweepRequest(
        group=autotuned.whole_node_group(2),
        problem=problem("all_reduce", "float32", count=0, candidates=CANDIDATES[:2]),
        counts=[1024, 8192, 65536], options=FAST)
    updates = list(client.sweep(request))
    assert [u.done for u in updates] == [1, 2, 3, 3]
    assert all(u.total == 3 for u in updates)
    assert all(u.HasField("size_result") for u in updates[:3])
    table = updates[-1].table
    assert table.ranges[0].min_count == 1024 and table.ranges[-1].max_count == 65536
    sizes, table2 = client.sweep_table(request)
    assert len(sizes) == 3 and sizes[0].status == pb.CACHED
    assert [r.winner for r in table2.ranges] == [r.winner for r in table.ranges]


def test_unknown_candidate_names_the_field(client):
    p = problem("all_reduce", "float32", count=1024, candidates=["all_reduce/one_shot",
                                                                 "all_reduce/nope"])
    with pytest.raises(InvalidArgument) as e:
        client.tune([p], options=FAST)
    assert e.value.field == "problems[0].candidates[1].impl"
    assert "all_reduce/nope" in str(e.value)
    assert e.value.code == "INVALID_ARGUMENT"


def test_bad_parameter_and_world_size(client):
    with pytest.raises(InvalidArgument) as e:
        client.tune([problem("all_reduce", "float32", 1024, ["all_reduce/ring:nope=1"])])
    assert e.value.field == 'problems[0].candidates[0].params["nope"]'
    with pytest.raises(InvalidArgument) as e:
        client.tune([problem("all_reduce", "float32", 1024, CANDIDATES)],
                    group=autotuned.whole_node_group(64))
    assert e.value.field == "group.world_size"


def test_no_candidate_can_run_is_invalid(client):
    """The sim's algorithms are float32 only: a bfloat16 problem none of whose
    candidates can run is INVALID_ARGUMENT naming the first (one that cannot
    run beside one that can is ruled out instead: service_test)."""
    with pytest.raises(InvalidArgument) as e:
        client.tune([problem("all_reduce", "bfloat16", 4096, ["all_reduce/ring"])])
    assert e.value.field == "problems[0].candidates[0].impl"


def test_whole_group_on_chosen_gpus(client):
    p = [problem("all_reduce", "float32", 1024, CANDIDATES)]
    r = client.tune(p, group=autotuned.whole_node_group(2, gpus=[3, 1]))
    assert r.results[0].status in (pb.TUNED, pb.CACHED)
    with pytest.raises(InvalidArgument) as e:
        client.tune(p, group=autotuned.whole_node_group(2, gpus=[3, 4]))
    assert e.value.field == "group.members[1].local_gpu"
    with pytest.raises(InvalidArgument):
        autotuned.whole_node_group(2, gpus=[0])


def test_client_side_input_errors():
    with pytest.raises(InvalidArgument):
        problem("all_mix", "float32", 1, CANDIDATES)
    with pytest.raises(InvalidArgument):
        problem("all_reduce", "int8", 1, CANDIDATES)
    with pytest.raises(InvalidArgument):
        autotuned.candidate("all_reduce/ring:chunk_kib=lots")
    c = autotuned.candidate("all_reduce/ring:chunk_kib=64")
    assert c.impl == "all_reduce/ring" and c.params["chunk_kib"] == 64
    assert autotuned.candidate_spec(c) == "all_reduce/ring:chunk_kib=64"


def test_group_mismatch_is_an_invalid_argument():
    # Raised on the client side; callers catching InvalidArgument catch it too.
    with pytest.raises(InvalidArgument) as e:
        raise autotuned.GroupMismatch("group 'g' was described for rank 1", target="unix:/x")
    assert isinstance(e.value, autotuned.GroupMismatch)
    assert e.value.code == "INVALID_ARGUMENT" and e.value.target == "unix:/x"
    assert str(e.value) == "INVALID_ARGUMENT: group 'g' was described for rank 1 (unix:/x)"


def test_no_daemon_is_unavailable():
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as e:
        Client("/tmp/atpy-no-such-dir/none.sock", connect_timeout=1.0)
    assert time.monotonic() - t0 < 5
    assert "none.sock" in str(e.value)
    lazy = Client("/tmp/atpy-no-such-dir/none.sock", connect_timeout=None, query_timeout=2)
    with pytest.raises(Unavailable):
        lazy.node_info()
    lazy.close()


def test_deadline_exceeded(client):
    p = problem("all_reduce", "float32", 1024, ["all_reduce/hangs"])
    with pytest.raises(DeadlineExceeded):
        client.tune([p], options=pb.Options(warmup=1, iterations=2, timeout_ms=20000,
                                            refresh=True), timeout=1.0)


def test_daemon_killed_mid_call():
    d = Daemon(config_text='sim { gpus: 4 faults { name: "all_reduce/hangs" '
                           'base: "all_reduce/ring" kind: HANG rank: 1 } }')
    try:
        c = Client(d.target, connect_timeout=10, measure_timeout=60)
        p = problem("all_reduce", "float32", 1024, ["all_reduce/hangs"])
        threading.Timer(1.0, d.kill).start()
        t0 = time.monotonic()
        with pytest.raises(Unavailable):
            c.tune([p], options=pb.Options(warmup=1, iterations=2, timeout_ms=30000))
        assert time.monotonic() - t0 < 20
        c.close()
    finally:
        d.stop()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))


def test_local_gpu_found_by_pci_address(client):
    """A process's GPU is named by the daemon's index for its PCI address,
    whatever order or CUDA_VISIBLE_DEVICES the process sees its GPUs in."""
    from autotuned.group import daemon_gpu_index, parse_pci_bus_id

    assert parse_pci_bus_id("0000:1b:00.0") == (0, 0x1B, 0)
    assert parse_pci_bus_id("00000000:1B:00.0") == (0, 0x1B, 0)
    assert parse_pci_bus_id("") is None
    assert parse_pci_bus_id("0000:zz:00.0") is None
    gpus = [pb.Gpu(index=0, pci_bus_id="0000:00:06.0"), pb.Gpu(index=1, pci_bus_id="0000:00:07.0")]
    assert daemon_gpu_index((0, 0, 7), gpus) == 1
    assert daemon_gpu_index((0, 0, 6), gpus) == 0
    assert daemon_gpu_index((0, 0, 8), gpus) is None
    # The sim's virtual GPUs have no PCI address: nothing matches.
    assert daemon_gpu_index((0, 0, 6), client.node_info().gpus) is None
