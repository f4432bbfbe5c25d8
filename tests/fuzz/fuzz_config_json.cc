// Fuzzes the JSON kilnd reads from disk rather than from a request: the
// --prices table, the sandbox and snapshot records it reads back from its
// database at a restart (a state directory can be damaged or tampered
// with), and an image recipe. Each must either be read or refused with an
// exception the caller turns into a message; a value read must survive
// being written and read again.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "control/metering.h"
#include "control/sandbox_record.h"
#include "fuzz_util.h"
#include "images/parse/recipe.h"
#include "store/snapshot_store.h"

namespace {

template <typename T>
void RoundTrip(const nlohmann::json& j) {
  T value;
  try {
    value = j.get<T>();
  } catch (const nlohmann::json::exception&) {
    return;  // refused: kilnd logs the record and skips it
  }
  nlohmann::json again = value;
  try {
    static_cast<void>(again.get<T>());
  } catch (const nlohmann::json::exception&) {
    __builtin_trap();  // kiln cannot read what it wrote
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  nlohmann::json j = nlohmann::json::parse(fuzz::AsText(data, size), nullptr, false);
  if (j.is_discarded()) return 0;  // kilnd: "--prices: FILE is not JSON"
  std::optional<control::PriceTable> prices;
  try {
    prices = control::PriceTable::FromJson(j);
  } catch (const std::invalid_argument&) {
  } catch (const nlohmann::json::exception&) {
  }
  // A table kiln accepted must be accepted again as it writes it (an
  // exception here is a crash).
  if (prices) static_cast<void>(control::PriceTable::FromJson(prices->ToJson()));
  RoundTrip<control::SandboxRecord>(j);
  RoundTrip<store::SnapshotRecord>(j);
  static_cast<void>(images::RecipeToBuild(j));
  return 0;
}
