"""The two tiers of the Python tests that spawn ranks (tests/tier.py)."""

def tiered_torch_test(name, long_name, script, size, data, tags = [], shard_count = None):
    """`name` and its manual-tagged long twin `long_name`.

    Both run tests/`script` with tests/run_with_torch.sh (the PyTorch that
    deploy/setup.sh installs) and `data`, with `tags`; the twin sets
    AUTOTUNED_LONG=1, which runs the long tier too. `shard_count` splits the
    default tier's tests over that many processes (tests/conftest.py), so
    that one slow file does not run alone at the end of the suite.
    """
    for test_name, env, tier_tags, shards in [
        (name, {}, tags, shard_count),
        (long_name, {"AUTOTUNED_LONG": "1"}, tags + ["manual"], None),
    ]:
        native.sh_test(
            name = test_name,
            size = size,
            srcs = ["tests/run_with_torch.sh"],
            args = [script],
            data = data,
            env = env,
            tags = tier_tags,
            shard_count = shards,
        )
