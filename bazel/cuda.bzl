"""nvcc builds of .cu files, and the parts of the build that exist only with
CUDA. Bazel 4 has no CUDA rules here: nvcc (from the CUDA root that
//bazel:cuda_configure.bzl found) runs in a genrule and its object file goes
into a cc_library or cc_binary like any other, linked with
@local_cuda//:cudart. Without a CUDA root the genrule is incompatible, like
@local_cuda's libraries, and so is everything built from it."""

load("@local_cuda//:defs.bzl", "CUDA_ROOT")

# One set of flags for every .cu file. sm_90 SASS for H100/H200 plus
# compute_90 PTX for newer GPUs; -fPIC because cc_test links dependencies
# into shared objects; the host compiler's warnings as for the C++ code
# (.bazelrc: -Wall -Wextra -Werror) and nvcc's own warnings as errors too.
# Run from the execroot: -I. makes "kernels/x.h" resolve as in C++ code.
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler",
    "-fPIC,-Wall,-Wextra,-Werror",
    "-Werror",
    "all-warnings",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_90,code=compute_90",
    "-I.",
]

def if_cuda(with_cuda, without_cuda = []):
    """`with_cuda` in a build with a CUDA root, else `without_cuda`."""
    return with_cuda if CUDA_ROOT else without_cuda

def requires_cuda():
    """target_compatible_with of a target that cannot work without CUDA (one
    that depends on @local_cuda is incompatible already)."""
    return if_cuda([], ["@//bazel:incompatible"])

def requires_no_cuda():
    """target_compatible_with of a check of the build without CUDA."""
    return if_cuda(["@//bazel:incompatible"], [])

def cuda_object(name, src, out, hdrs = [], **kwargs):
    """Compiles the .cu file `src` with nvcc -c into the object file `out`,
    for the srcs of a cc_library or cc_binary. Always position-independent;
    name it "x.pic.o" for a cc_library (used by shared and static links
    alike) and "x.o" for a cc_binary (which links only non-PIC-named
    objects into an executable). `hdrs`: every file `src` includes from this
    workspace."""
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = [out],
        target_compatible_with = requires_cuda(),
        cmd = " ".join(["%s/bin/nvcc" % CUDA_ROOT, "-c"] + NVCC_FLAGS + ["-o $@ $(location %s)" % src]),
        **kwargs
    )
