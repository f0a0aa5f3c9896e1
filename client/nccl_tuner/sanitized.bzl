"""The tuner library and its test built under one sanitizer (BUILD says why)."""

def nccl_tuner_sanitized_test(san, flags, copts, tags = []):
    """libautotuned_nccl_tuner_<san>.so and nccl_tuner_<san>_test, which loads it.

    Args:
      san: the name's part, e.g. "asan".
      flags: the sanitizer's flags, for compiling and linking both.
      copts: the library's own C options.
      tags: the test's tags.
    """
    lib = "libautotuned_nccl_tuner_%s.so" % san
    native.cc_binary(
        name = lib,
        testonly = True,
        srcs = [
            "nccl_tuner.c",
            "nccl_tuner_abi.h",
            "nccl_tuner_table.c",
            "nccl_tuner_table.h",
        ],
        additional_linker_inputs = ["nccl_tuner.lds"],
        copts = copts + flags,
        linkopts = flags + ["-Wl,--version-script=$(location nccl_tuner.lds)"],
        linkshared = True,
        deps = [":nccl_tuner_header"],
    )
    native.cc_test(
        name = "nccl_tuner_%s_test" % san,
        size = "small",
        srcs = [
            "nccl_tuner_abi.h",
            "nccl_tuner_test.cc",
        ],
        copts = flags,
        data = [":" + lib],
        env = {"AUTOTUNED_NCCL_TUNER_LIB": "$(rootpath :%s)" % lib},
        linkopts = flags,
        tags = tags,
        deps = [
            ":nccl_tuner_header",
            "//third_party:catch2_main",
        ],
    )
