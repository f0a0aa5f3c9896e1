"""nvcc builds of .cu files. Bazel 4 has no CUDA rules here: nvcc (from the
CUDA toolkit in /usr/local/cuda) runs in a genrule and its object file goes
into a cc_library or cc_binary like any other, linked with
@local_cuda//:cudart."""

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

NVCC = "/usr/local/cuda/bin/nvcc"

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
        cmd = " ".join([NVCC, "-c"] + NVCC_FLAGS + ["-o $@ $(location %s)" % src]),
        **kwargs
    )
