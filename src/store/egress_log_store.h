// The egress log: one row per connection a sandbox attempted through its
// proxy, refused or carried, kept in the daemon's database so it outlives a
// restart and can be paged with a cursor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/db.h"

namespace kiln::store {

struct EgressEntry {
  int64_t seq = 0;  // cursor order, unique across sandboxes
  std::string sandbox_id;
  int64_t start_ms = 0;
  std::string method;   // CONNECT, GET, ...
  std::string host;     // as the client named it (normalized)
  std::string address;  // the address dialled (or refused); "" if none
  int port = 0;
  std::string verdict;  // allowed | internet-off | not-allowed | denied | private-address | ...
  int64_t bytes_out = 0, bytes_in = 0;  // sandbox -> internet, internet -> sandbox
  int64_t duration_ms = 0;
  bool open = false;      // still carrying bytes
  std::string closed_by;  // client | server | policy | sandbox | error
};

class EgressLogStore {
 public:
  // Keeps at most `per_sandbox_cap` rows per sandbox (the oldest go first).
  explicit EgressLogStore(Db& db, int64_t per_sandbox_cap = 10000);

  // Appends an entry; returns its seq.
  int64_t Add(const EgressEntry& e);
  // Records the end of an open entry.
  void Close(int64_t seq, int64_t bytes_out, int64_t bytes_in, int64_t duration_ms,
             const std::string& closed_by);
  // Entries of one sandbox with seq > after, oldest first, at most `limit`.
  std::vector<EgressEntry> List(const std::string& sandbox_id, int64_t after, int limit) const;
  // Entries left open by a daemon that died: closed as "daemon-restart".
  void CloseAllOpen();
  // Retention: drops closed entries that started before `ms`.
  void DeleteBefore(int64_t ms);

 private:
  Db& db_;
  int64_t cap_;
  int64_t adds_ = 0;
};

}  // namespace kiln::store
