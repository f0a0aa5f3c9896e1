#include "daemon/measure/backend/sim/group.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace autotuned::sim {

absl::Status CutOffStatus() {
  return absl::DeadlineExceededError("cut off at the timeout");
}

Group::Group(const ProblemSpec& problem, absl::Time deadline,
             int64_t scratch_count)
    : Group(problem, deadline, scratch_count, {}, nullptr) {}

Group::Group(const ProblemSpec& problem, absl::Time deadline, int64_t scratch_count,
             std::vector<int> local_ranks, std::shared_ptr<RunTransport> transport)
    : problem_(problem),
      deadline_(deadline),
      scratch_count_(scratch_count),
      local_ranks_(std::move(local_ranks)),
      transport_(std::move(transport)) {
  const int n = problem_.world_size;
  if (transport_ == nullptr && local_ranks_.empty()) {
    for (int r = 0; r < n; ++r) local_ranks_.push_back(r);
  }
  is_local_.assign(std::max(n, 0), 0);
  for (int r : local_ranks_) {
    if (r >= 0 && r < n) is_local_[r] = 1;
  }
  inputs_.reserve(n);
  outputs_.reserve(n);
  scratch_.reserve(n);
  for (int r = 0; r < n; ++r) {
    inputs_.emplace_back(static_cast<size_t>(problem_.InputCount(r)));
    outputs_.emplace_back(static_cast<size_t>(problem_.OutputCount(r)));
    scratch_.emplace_back(static_cast<size_t>(scratch_count));
  }
}

namespace {

// A rank stopped at a barrier by the timeout is a victim of the ranks that
// did not arrive, not the cause: it reports ABORTED, so that the rank that
// was stuck in its own work (DEADLINE_EXCEEDED) is the one blamed.
absl::Status AtBarrier(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
  return absl::AbortedError(
      absl::StrCat("barrier: ", s.message(), " while waiting for other ranks"));
}

}  // namespace

absl::Status Group::CutOffLocked() {
  // This rank leaves its wait for good, so a barrier can no longer complete:
  // make that visible to every peer at once rather than at its own deadline.
  if (abort_.ok()) abort_ = CutOffStatus();
  return abort_;
}

absl::Status Group::Barrier() {
  mu_.Lock();
  absl::Status out;
  if (!abort_.ok()) {
    out = AtBarrier(abort_);
  } else if (absl::Now() >= deadline_) {
    out = AtBarrier(CutOffLocked());
  } else {
    const uint64_t generation = generation_;
    if (++arrived_ == static_cast<int>(local_ranks_.size())) {
      arrived_ = 0;
      if (transport_ != nullptr) {
        // Every local rank waits in this barrier: nobody reads or writes a
        // buffer while the mirrors are rewritten.
        mu_.Unlock();
        absl::Status exchanged = ExchangeMirrors(generation);
        mu_.Lock();
        if (!exchanged.ok() && abort_.ok()) {
          abort_ = exchanged.code() == absl::StatusCode::kDeadlineExceeded
                       ? CutOffStatus()
                       : exchanged;
        }
      }
      if (abort_.ok()) {
        ++generation_;  // waiters' conditions are re-evaluated on unlock
      } else {
        out = AtBarrier(abort_);
      }
    } else {
      auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return generation_ != generation || !abort_.ok();
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), deadline_);
      if (generation_ != generation) {
        out = absl::OkStatus();
      } else if (!abort_.ok()) {
        out = AtBarrier(abort_);
      } else {
        out = AtBarrier(CutOffLocked());
      }
    }
  }
  mu_.Unlock();
  return out;
}

absl::Status Group::ExchangeMirrors(uint64_t generation) {
  absl::StatusOr<std::vector<std::string>> others = transport_->Exchange(
      static_cast<int64_t>(generation), EncodeChanges(*this, local_ranks_, &sent_), deadline_);
  if (!others.ok()) return others.status();
  for (const std::string& data : *others) {
    absl::Status s = DecodeBuffers(data, *this);
    if (!s.ok()) {
      transport_->Abort(s);
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Group::Sleep(absl::Duration d) {
  const absl::Time wake_at = absl::Now() + d;  // saturates at InfiniteFuture
  absl::MutexLock lock(&mu_);
  auto aborted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !abort_.ok();
  };
  mu_.AwaitWithDeadline(absl::Condition(&aborted), std::min(wake_at, deadline_));
  if (!abort_.ok()) return abort_;
  if (wake_at < deadline_) return absl::OkStatus();
  return CutOffLocked();
}

void Group::Abort(absl::Status reason) {
  absl::Status tell;
  {
    absl::MutexLock lock(&mu_);
    if (!abort_.ok()) return;
    abort_ = reason.ok() ? absl::AbortedError("aborted") : std::move(reason);
    tell = abort_;
  }
  if (transport_ != nullptr) transport_->Abort(tell);
}

absl::Status Group::abort_status() const {
  absl::MutexLock lock(&mu_);
  return abort_;
}

namespace {

float* Buffer(Group& g, int rank, int kind, int64_t* count) {
  const ProblemSpec& p = g.problem();
  switch (kind) {
    case 0:
      *count = p.InputCount(rank);
      return g.input(rank);
    case 1:
      *count = p.OutputCount(rank);
      return g.output(rank);
    default:
      *count = g.scratch_count();
      return g.scratch(rank);
  }
}

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

namespace {

constexpr size_t kHead = 2 * sizeof(int32_t) + 2 * sizeof(int64_t);

void PutRecord(std::string* out, int32_t rank, int32_t kind, int64_t offset, int64_t count,
               const float* data) {
  Put<int32_t>(out, rank);
  Put<int32_t>(out, kind);
  Put<int64_t>(out, offset);
  Put<int64_t>(out, count);
  out->append(reinterpret_cast<const char*>(data + offset),
              static_cast<size_t>(count) * sizeof(float));
}

}  // namespace

std::string EncodeBuffers(Group& group, const std::vector<int>& ranks, bool inputs) {
  std::string out;
  for (int r : ranks) {
    for (int kind = inputs ? 0 : 1; kind < 3; ++kind) {
      int64_t count = 0;
      const float* data = Buffer(group, r, kind, &count);
      PutRecord(&out, r, kind, 0, count, data);
    }
  }
  return out;
}

std::string EncodeChanges(Group& group, const std::vector<int>& ranks,
                          std::vector<std::vector<float>>* sent) {
  constexpr int64_t kBlock = 1024;  // floats compared at a time
  std::string out;
  sent->resize(ranks.size() * 3);
  for (size_t i = 0; i < ranks.size(); ++i) {
    for (int kind = 0; kind < 3; ++kind) {
      int64_t count = 0;
      const float* data = Buffer(group, ranks[i], kind, &count);
      std::vector<float>& copy = (*sent)[i * 3 + kind];
      if (static_cast<int64_t>(copy.size()) != count) copy.assign(count, 0.0f);
      int64_t run_begin = -1;
      for (int64_t b = 0; b <= count; b += kBlock) {
        const int64_t n = std::min(kBlock, count - b);
        // Bytes, not floats: NaN (poisoned outputs) compares unequal to itself.
        const bool changed =
            n > 0 && std::memcmp(data + b, copy.data() + b, n * sizeof(float)) != 0;
        if (changed && run_begin < 0) run_begin = b;
        if (!changed && run_begin >= 0) {
          PutRecord(&out, ranks[i], kind, run_begin, b - run_begin, data);
          std::memcpy(copy.data() + run_begin, data + run_begin,
                      (b - run_begin) * sizeof(float));
          run_begin = -1;
        }
        if (n <= 0) break;
      }
      if (run_begin >= 0) {
        PutRecord(&out, ranks[i], kind, run_begin, count - run_begin, data);
        std::memcpy(copy.data() + run_begin, data + run_begin,
                    (count - run_begin) * sizeof(float));
      }
    }
  }
  return out;
}

absl::Status DecodeBuffers(const std::string& data, Group& group) {
  size_t at = 0;
  while (at < data.size()) {
    if (data.size() - at < kHead) {
      return absl::DataLossError("exchange: a record's header is cut short");
    }
    int32_t rank, kind;
    int64_t offset, count;
    std::memcpy(&rank, data.data() + at, sizeof(rank));
    std::memcpy(&kind, data.data() + at + 4, sizeof(kind));
    std::memcpy(&offset, data.data() + at + 8, sizeof(offset));
    std::memcpy(&count, data.data() + at + 16, sizeof(count));
    at += kHead;
    if (rank < 0 || rank >= group.world_size() || group.is_local(rank)) {
      return absl::DataLossError(
          absl::StrCat("exchange: buffers of rank ", rank, ", which is not a remote rank"));
    }
    if (kind < 0 || kind > 2) {
      return absl::DataLossError(absl::StrCat("exchange: unknown buffer kind ", kind));
    }
    int64_t size = 0;
    float* dst = Buffer(group, rank, kind, &size);
    if (offset < 0 || count < 0 || offset > size || count > size - offset ||
        data.size() - at < static_cast<size_t>(count) * sizeof(float)) {
      return absl::DataLossError(absl::StrCat("exchange: rank ", rank, " buffer kind ", kind,
                                              ": floats [", offset, ", +", count,
                                              ") outside the ", size, " expected"));
    }
    if (count > 0) {
      std::memcpy(dst + offset, data.data() + at, static_cast<size_t>(count) * sizeof(float));
    }
    at += static_cast<size_t>(count) * sizeof(float);
  }
  return absl::OkStatus();
}

}  // namespace autotuned::sim
