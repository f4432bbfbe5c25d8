// The file-watch ops' structs (src/proto/ops.h) to and from JSON.
#include "proto/ops.h"
#include "proto/ops_fields.h"

namespace kiln::proto {

using nlohmann::json;

void to_json(json& j, const WatchStartRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
  j["path"] = v.path;
  j["recursive"] = v.recursive;
  j["events"] = v.events;
  j["include"] = v.include;
  j["exclude"] = v.exclude;
  j["batchMs"] = v.batch_ms;
  j["timeoutMs"] = v.timeout_ms;
  j["maxWatches"] = v.max_watches;
  if (v.entries) j["entries"] = true;
  if (!v.xattr_prefix.empty()) j["xattrPrefix"] = v.xattr_prefix;
}
void from_json(const json& j, WatchStartRequest& v) {
  Object(j);
  Need(j, "id", v.id);
  Need(j, "path", v.path);
  Take(j, "recursive", v.recursive);
  Take(j, "events", v.events);
  Take(j, "include", v.include);
  Take(j, "exclude", v.exclude);
  Take(j, "batchMs", v.batch_ms);
  Take(j, "timeoutMs", v.timeout_ms);
  Take(j, "maxWatches", v.max_watches);
  Take(j, "entries", v.entries);
  Take(j, "xattrPrefix", v.xattr_prefix);
}

void to_json(json& j, const WatchInfo& v) {
  j = json{{"id", v.id},
           {"path", v.path},
           {"recursive", v.recursive},
           {"events", v.events},
           {"include", v.include},
           {"exclude", v.exclude},
           {"batchMs", v.batch_ms},
           {"timeoutMs", v.timeout_ms},
           {"maxWatches", v.max_watches},
           {"watched", v.watched},
           {"cursor", v.cursor},
           {"firstCursor", v.first_cursor},
           {"state", v.state},
           {"endReason", OrNull(v.end_reason)},
           {"startedMs", v.started_ms},
           {"endedMs", OrNull(v.ended_ms)}};
}
void from_json(const json& j, WatchInfo& v) {
  Need(j, "id", v.id);
  Need(j, "path", v.path);
  Need(j, "recursive", v.recursive);
  Need(j, "events", v.events);
  Need(j, "include", v.include);
  Need(j, "exclude", v.exclude);
  Need(j, "batchMs", v.batch_ms);
  Need(j, "timeoutMs", v.timeout_ms);
  Need(j, "maxWatches", v.max_watches);
  Need(j, "watched", v.watched);
  Need(j, "cursor", v.cursor);
  Need(j, "firstCursor", v.first_cursor);
  Need(j, "state", v.state);
  Take(j, "endReason", v.end_reason);
  Need(j, "startedMs", v.started_ms);
  Take(j, "endedMs", v.ended_ms);
}

void to_json(json& j, const WatchList& v) { j = json{{"data", v.data}}; }
void from_json(const json& j, WatchList& v) { Need(j, "data", v.data); }

void to_json(json& j, const WatchReadRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
  j["cursor"] = v.cursor;
  j["waitMs"] = v.wait_ms;
}
void from_json(const json& j, WatchReadRequest& v) {
  Need(j, "id", v.id);
  Take(j, "cursor", v.cursor);
  Take(j, "waitMs", v.wait_ms);
}

void to_json(json& j, const WatchEvent& v) {
  j = json{{"type", v.type}, {"path", v.path}, {"isDir", v.is_dir}};
  PutIf(j, "oldPath", v.old_path);
  if (v.count > 1) j["count"] = v.count;
  PutIf(j, "entry", v.entry);
}
void from_json(const json& j, WatchEvent& v) {
  Need(j, "type", v.type);
  Need(j, "path", v.path);
  Take(j, "isDir", v.is_dir);
  Take(j, "oldPath", v.old_path);
  Take(j, "count", v.count);
  Take(j, "entry", v.entry);
}

void to_json(json& j, const WatchNotice& v) {
  j = json{{"k", v.kind}};
  if (v.kind == "overflow") {
    j["dropped"] = v.dropped;
    j["reason"] = v.reason;
  } else if (v.kind == "limit") {
    j["watches"] = v.watches;
  } else if (!v.reason.empty()) {
    j["reason"] = v.reason;
  }
}
void from_json(const json& j, WatchNotice& v) {
  Need(j, "k", v.kind);
  Take(j, "dropped", v.dropped);
  Take(j, "reason", v.reason);
  Take(j, "watches", v.watches);
}

void to_json(json& j, const WatchItem& v) {
  j = json{{"seq", v.seq}};
  PutIf(j, "event", v.event);
  PutIf(j, "notice", v.notice);
}
void from_json(const json& j, WatchItem& v) {
  Need(j, "seq", v.seq);
  Take(j, "event", v.event);
  Take(j, "notice", v.notice);
}

void to_json(json& j, const WatchPage& v) {
  j = json{{"items", v.items},
           {"nextCursor", v.next_cursor},
           {"dropped", v.dropped},
           {"ended", v.ended},
           {"watch", v.watch}};
}
void from_json(const json& j, WatchPage& v) {
  Need(j, "items", v.items);
  Need(j, "nextCursor", v.next_cursor);
  Need(j, "dropped", v.dropped);
  Need(j, "ended", v.ended);
  Need(j, "watch", v.watch);
}

void to_json(json& j, const WatchStopRequest& v) {
  j = RequestObject(v.kOp);
  j["id"] = v.id;
}
void from_json(const json& j, WatchStopRequest& v) { Need(j, "id", v.id); }
void to_json(json& j, const WatchStopped& v) { j = json{{"stopped", v.stopped}}; }
void from_json(const json& j, WatchStopped& v) { Need(j, "stopped", v.stopped); }

void to_json(json& j, const WatchListRequest& v) { j = RequestObject(v.kOp); }
void from_json(const json& j, WatchListRequest& v) { EmptyRequestFromJson(j, v); }

}  // namespace kiln::proto
