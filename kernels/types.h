// Plain value types shared by the kernels, their CPU references and the
// daemon. Host and device code alike include this header: no STL, no logging.
#pragma once

#include <stdint.h>

namespace autotuned {

enum class Collective : int32_t {
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllToAll = 4,
  kBroadcast = 5,
};

enum class DType : int32_t {
  kFloat32 = 1,
  kBFloat16 = 2,
  kFloat16 = 3,
};

enum class ReduceOp : int32_t {
  kSum = 1,
  kMax = 2,
  kMin = 3,
};

}  // namespace autotuned
