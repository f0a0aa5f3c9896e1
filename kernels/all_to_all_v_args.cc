// Pure host part of the all-to-all with uneven splits (AT_ALGO_ALL_TO_ALL_V):
// at_p2p_check_all_to_all_v. No CUDA call and no CUDA header, like
// p2p_args.cc, whose at_p2p_check_args it runs for the fields they share.
#include <stdint.h>

#include "kernels/args_reason.h"
#include "kernels/autotuned_kernels.h"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {
namespace {

// Entries and sums beyond this are rejected: at_p2p_check_args' count limit,
// so that no byte offset of a row or a column comes near overflow.
constexpr int64_t kMaxElems = int64_t{1} << 44;

}  // namespace
}  // namespace autotuned::kernels::p2p

using namespace autotuned::kernels::p2p;  // NOLINT: C ABI definition below

extern "C" int at_p2p_check_all_to_all_v(const at_p2p_args* a, const int64_t* split_counts,
                                         char* reason, size_t reason_len) {
  char* r = reason;
  const size_t n = reason_len;
  if (r != nullptr && n > 0) r[0] = '\0';
  if (a == nullptr) return Fail(r, n, "args is NULL");
  // world, rank, dtype, launch shape, spin limit and signals: the even
  // all_to_all's checks, with no data (count 0 stops them there).
  at_p2p_args shared = *a;
  shared.count = 0;
  const int rc = at_p2p_check_args(AT_ALGO_ALL_TO_ALL, &shared, reason, reason_len);
  if (rc != AT_OK) return rc;
  if (split_counts == nullptr) return Fail(r, n, "split_counts is NULL");
  const int w = a->world;
  for (int i = 0; i < w * w; ++i) {
    const int64_t c = split_counts[i];
    if (c < 0) {
      return Fail(r, n, "split_counts[%d] (rank %d to rank %d) is negative: %lld", i, i / w,
                  i % w, static_cast<long long>(c));
    }
    if (c > kMaxElems) {
      return Fail(r, n, "split_counts[%d] (rank %d to rank %d) is %lld, beyond 2^44 elements", i,
                  i / w, i % w, static_cast<long long>(c));
    }
  }
  // Entries of at most 2^44, at most 64 of them: no sum below overflows.
  int64_t total = 0;
  for (int i = 0; i < w * w; ++i) total += split_counts[i];
  for (int p = 0; p < w; ++p) {
    int64_t row = 0, column = 0;
    for (int q = 0; q < w; ++q) {
      row += split_counts[p * w + q];
      column += split_counts[q * w + p];
    }
    if (row > kMaxElems) {
      return Fail(r, n, "split_counts: rank %d sends %lld elements in all, beyond 2^44", p,
                  static_cast<long long>(row));
    }
    if (column > kMaxElems) {
      return Fail(r, n, "split_counts: rank %d receives %lld elements in all, beyond 2^44", p,
                  static_cast<long long>(column));
    }
  }
  if (total == 0) return AT_OK;  // a no-op on every rank: no data pointer is used

  const int me = a->rank;
  const int64_t esize = ElemBytes(a->dtype);
  int64_t in_elems = 0, out_elems = 0;
  for (int q = 0; q < w; ++q) {
    in_elems += split_counts[me * w + q];
    out_elems += split_counts[q * w + me];
  }
  if (a->peer_inputs == nullptr) return Fail(r, n, "peer_inputs is NULL");
  for (int s = 0; s < w; ++s) {
    // This rank reads rank s's input for its piece, and its peers read its
    // own whenever its row is not empty.
    const bool used = split_counts[s * w + me] > 0 || (s == me && in_elems > 0);
    if (!used) continue;
    if (a->peer_inputs[s] == nullptr) return Fail(r, n, "peer_inputs[%d] is NULL", s);
    if (!Aligned(a->peer_inputs[s], kVecBytes)) {
      return Fail(r, n, "peer_inputs[%d] not %d-byte aligned", s, kVecBytes);
    }
  }
  if (out_elems == 0) return AT_OK;  // this rank writes nothing
  if (a->output == nullptr) return Fail(r, n, "output is NULL");
  if (!Aligned(a->output, kVecBytes)) {
    return Fail(r, n, "output not %d-byte aligned", kVecBytes);
  }
  if (in_elems > 0) {
    if (Overlap(a->peer_inputs[me], in_elems * esize, a->output, out_elems * esize)) {
      return Fail(r, n, "output overlaps this rank's input (all_to_all_v cannot run in place)");
    }
  }
  return AT_OK;
}
