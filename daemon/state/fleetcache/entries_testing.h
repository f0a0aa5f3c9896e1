// Test helper: cache key texts and a TUNED ranking for the fleet cache's
// tests.
#pragma once

#include <cstdint>
#include <string>

#include "proto/autotuned.pb.h"

namespace autotuned::fleetcache {

inline constexpr char kTestFingerprint[] = "00112233aabbccdd";

// CacheKeyText of a float32 all_reduce of `count` elements (one candidate,
// all_reduce/ring) for 4 ranks on a node of `fingerprint`.
std::string TestKeyText(int64_t count, const std::string& fingerprint = kTestFingerprint);

// A TUNED result whose winner is all_reduce/ring, its only candidate.
v1::ProblemResult TestRanking();

}  // namespace autotuned::fleetcache
