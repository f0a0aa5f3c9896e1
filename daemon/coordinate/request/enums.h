// The wire's enums (proto/autotuned.proto) as the daemon's problem
// vocabulary (daemon/common/problem.h). Private to daemon/coordinate/request: the
// problem validation (validate_problem.cc) names the field a value came from
// when one is unknown.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include "daemon/common/problem.h"
#include "proto/autotuned.pb.h"

namespace autotuned::request_internal {

// `c`, `d` or `op` into `out`; false for a value this daemon does not know
// (UNSPECIFIED included, but for the reduce op, which defaults to sum).
bool ToCollective(v1::Collective c, Collective* out);
bool ToDType(v1::DType d, DType* out);
bool ToReduceOp(v1::ReduceOp op, ReduceOp* out);

// Whether `spec`'s collective reduces, and so takes a reduce op.
bool Reducing(const ProblemSpec& spec);

}  // namespace autotuned::request_internal
