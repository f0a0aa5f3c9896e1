"""The two tiers of the Python tests that spawn ranks (tests/tier.py)."""

def tiered_torch_test(name, long_name, script, size, data, tags = []):
    """`name` and its manual-tagged long twin `long_name`.

    Both run tests/`script` with tests/run_with_torch.sh (the PyTorch that
    deploy/setup.sh installs) and `data`, with `tags`; the twin sets
    AUTOTUNED_LONG=1, which runs the long tier too.
    """
    for test_name, env, tier_tags in [
        (name, {}, tags),
        (long_name, {"AUTOTUNED_LONG": "1"}, tags + ["manual"]),
    ]:
        native.sh_test(
            name = test_name,
            size = size,
            srcs = ["tests/run_with_torch.sh"],
            args = [script],
            data = data,
            env = env,
            tags = tier_tags,
        )
