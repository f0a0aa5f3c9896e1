#include "client/cli/table.h"

#include <algorithm>
#include <utility>

namespace autotuned {
namespace cli {

TextTable::TextTable(std::vector<Column> columns)
    : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(const std::string& indent) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].title.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (columns_[c].align == Align::kRight) {
        line += pad + cells[c];
      } else {
        line += cells[c] + pad;
      }
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  std::vector<std::string> titles;
  for (const Column& column : columns_) titles.push_back(column.title);
  emit(titles);
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace cli
}  // namespace autotuned
