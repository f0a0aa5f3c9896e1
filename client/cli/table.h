// A plain-text table: columns padded to their widest cell, two spaces apart,
// no trailing blanks.
#pragma once

#include <string>
#include <vector>

namespace autotuned {
namespace cli {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string title;
    Align align = Align::kLeft;
  };

  explicit TextTable(std::vector<Column> columns);

  // Missing cells are blank; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // The title row, then one line per row, each ending in '\n'. `indent` is
  // put before every line.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace cli
}  // namespace autotuned
