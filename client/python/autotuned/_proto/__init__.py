"""Messages and stubs generated from proto/autotuned.proto by gen_stubs.sh.

The generated modules are not in the source tree: `bazel build` makes them,
and `client/python/gen_stubs.sh client/python` writes them here before
`pip install client/python`.
"""
