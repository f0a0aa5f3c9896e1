"""The two tiers of the Python tests that spawn ranks (tests/tier.py)."""

def tiered_torch_test(name, script, size, data):
    """`name` and its manual-tagged long twin, `name` with `_long` before `_test`.

    Both run tests/`script` with tests/run_with_torch.sh (the PyTorch that
    deploy/setup.sh installs) and `data`; the twin sets AUTOTUNED_LONG=1,
    which runs the long tier too.
    """
    if not name.endswith("_test"):
        fail("tiered_torch_test: name must end with _test, got " + name)
    for test_name, env, tags in [
        (name, {}, []),
        (name[:-len("_test")] + "_long_test", {"AUTOTUNED_LONG": "1"}, ["manual"]),
    ]:
        native.sh_test(
            name = test_name,
            size = size,
            srcs = ["tests/run_with_torch.sh"],
            args = [script],
            data = data,
            env = env,
            tags = tags,
        )
