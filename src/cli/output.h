// Everything kiln prints: tables, key: value lines, --json answers, errors.
// Output goes through write(2) so it interleaves correctly with streamed
// command output and reaches a pipe as soon as it is produced.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::cli {

// False once the reader has gone away (EPIPE) or another write error hit.
bool WriteAll(int fd, std::string_view bytes);

void PrintOut(std::string_view text);         // stdout, as is
void PrintJson(const nlohmann::json& value);  // stdout, one line
void Warn(std::string_view message);          // stderr: "kiln: warning: ..."

// Columns padded to the widest cell (in UTF-8 characters), two spaces apart.
std::string FormatTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::string>>& rows);

// "key:   value" lines with the values aligned.
std::string FormatKeyValues(const std::vector<std::pair<std::string, std::string>>& pairs);

// A JSON value as a table cell: null/empty → "-", {"k":"v"} → "k=v, …".
std::string DisplayValue(const nlohmann::json& value);

// An object's fields as FormatKeyValues lines: those in `order` first
// (when present), then any others but "kind", so newer fields still show.
std::string FormatFields(const nlohmann::json& info, const std::vector<std::string>& order);

// A byte count for people: "512B", "1.5KiB", "2.0GiB"; "-" when not a count.
std::string FormatBytes(const nlohmann::json& bytes);

// A JSON number with `decimals` digits after the point; "-" when not a number.
std::string FormatNumber(const nlohmann::json& value, int decimals);

// Reports a failure on stderr: "kiln: code: message" (or JSON {"error": …}).
void ReportError(const std::exception& error, bool json);

}  // namespace kiln::cli
