"""Messages and stubs generated from proto/autotuned.proto by gen_stubs.sh,
with their types (.pyi).

The generated modules are not in git: the Bazel build makes them
(//client/python:stubs), build_wheel.sh puts them into the wheel, and
`client/python/gen_stubs.sh client/python` writes them here for use from
the source tree.
"""
