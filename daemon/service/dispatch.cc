#include "daemon/service/dispatch.h"

namespace autotuned {
namespace {

// Bytes of one rank's `count` elements (the size a caller dispatches on).
int64_t CountBytes(const v1::ProblemResult& r) {
  return r.problem().count() * (r.problem().dtype() == v1::FLOAT32 ? 4 : 2);
}

}  // namespace

v1::DispatchTable BuildDispatchTable(const std::vector<v1::ProblemResult>& sizes) {
  v1::DispatchTable table;
  v1::SizeRange* open = nullptr;
  for (const v1::ProblemResult& r : sizes) {
    const bool has_winner = !r.winner().empty();
    if (open != nullptr && has_winner && open->winner() == r.winner() &&
        open->winner_index() == r.winner_index()) {
      open->set_max_count(r.problem().count());
      open->set_max_bytes(CountBytes(r));
      continue;
    }
    open = table.add_ranges();
    open->set_min_count(r.problem().count());
    open->set_max_count(r.problem().count());
    open->set_min_bytes(CountBytes(r));
    open->set_max_bytes(CountBytes(r));
    open->set_winner(r.winner());
    open->set_winner_index(r.winner_index());
    if (!has_winner) open = nullptr;
  }
  return table;
}

}  // namespace autotuned
