// The file ops' structs (src/proto/ops.h) to and from JSON.
#include "proto/ops.h"
#include "proto/ops_fields.h"

namespace kiln::proto {

using nlohmann::json;

namespace {

// file.read, file.stat, ...: a request with a path and maybe more.
template <typename R>
json PathRequest(const R& v) {
  json j = RequestObject(v.kOp);
  j["path"] = v.path;
  return j;
}

}  // namespace

void to_json(json& j, const FileEntry& v) {
  j = json{{"name", v.name}, {"path", v.path}, {"type", v.type},
           {"size", v.size}, {"mode", v.mode}, {"modifiedMs", v.modified_ms},
           {"uid", v.uid},   {"gid", v.gid}};
  PutIf(j, "symlinkTarget", v.symlink_target);
  if (!v.xattrs.empty()) j["xattrs"] = v.xattrs;
}
void from_json(const json& j, FileEntry& v) {
  Need(j, "name", v.name);
  Need(j, "path", v.path);
  Need(j, "type", v.type);
  Need(j, "size", v.size);
  Need(j, "mode", v.mode);
  Need(j, "modifiedMs", v.modified_ms);
  Need(j, "uid", v.uid);
  Need(j, "gid", v.gid);
  Take(j, "symlinkTarget", v.symlink_target);
  Take(j, "xattrs", v.xattrs);
}

void to_json(json& j, const FileReadRequest& v) { j = PathRequest(v); }
void from_json(const json& j, FileReadRequest& v) { Need(j, "path", v.path); }
void to_json(json& j, const FileReadStart& v) { j = json{{"size", v.size}, {"mode", v.mode}}; }
void from_json(const json& j, FileReadStart& v) {
  Need(j, "size", v.size);
  Take(j, "mode", v.mode);
}
void to_json(json& j, const FileReadDone& v) { j = json{{"size", v.size}}; }
void from_json(const json& j, FileReadDone& v) { Need(j, "size", v.size); }

void to_json(json& j, const FileWriteRequest& v) {
  j = PathRequest(v);
  j["mode"] = v.mode;
  if (v.in_place) j["inPlace"] = true;
  if (!v.xattr_prefix.empty()) {
    j["xattrPrefix"] = v.xattr_prefix;
    j["xattrs"] = v.xattrs;
  }
}
void from_json(const json& j, FileWriteRequest& v) {
  Need(j, "path", v.path);
  Take(j, "mode", v.mode);
  Take(j, "inPlace", v.in_place);
  Take(j, "xattrPrefix", v.xattr_prefix);
  Take(j, "xattrs", v.xattrs);
}
void to_json(json& j, const FileWritten& v) { j = json{{"path", v.path}, {"size", v.size}}; }
void from_json(const json& j, FileWritten& v) {
  Need(j, "path", v.path);
  Need(j, "size", v.size);
}

void to_json(json& j, const FileListRequest& v) {
  j = PathRequest(v);
  j["depth"] = v.depth;
  if (!v.xattr_prefix.empty()) j["xattrPrefix"] = v.xattr_prefix;
}
void from_json(const json& j, FileListRequest& v) {
  Need(j, "path", v.path);
  Take(j, "depth", v.depth);
  Take(j, "xattrPrefix", v.xattr_prefix);
}
void to_json(json& j, const FileList& v) { j = json{{"data", v.data}}; }
void from_json(const json& j, FileList& v) { Need(j, "data", v.data); }

void to_json(json& j, const FileStatRequest& v) {
  j = PathRequest(v);
  if (!v.xattr_prefix.empty()) j["xattrPrefix"] = v.xattr_prefix;
}
void from_json(const json& j, FileStatRequest& v) {
  Need(j, "path", v.path);
  Take(j, "xattrPrefix", v.xattr_prefix);
}
void to_json(json& j, const FileStat& v) {
  if (!v.exists) {
    j = json{{"exists", false}, {"path", v.entry.path}};
    return;
  }
  to_json(j, v.entry);
  j["exists"] = true;
}
void from_json(const json& j, FileStat& v) {
  Need(j, "exists", v.exists);
  if (v.exists) {
    from_json(j, v.entry);
  } else {
    v.entry = FileEntry();
    Need(j, "path", v.entry.path);
  }
}

void to_json(json& j, const FileMkdirRequest& v) {
  j = PathRequest(v);
  j["parents"] = v.parents;
}
void from_json(const json& j, FileMkdirRequest& v) {
  Need(j, "path", v.path);
  Take(j, "parents", v.parents);
}

void to_json(json& j, const FileRemoveRequest& v) {
  j = PathRequest(v);
  j["recursive"] = v.recursive;
}
void from_json(const json& j, FileRemoveRequest& v) {
  Need(j, "path", v.path);
  Take(j, "recursive", v.recursive);
}
void to_json(json& j, const FileRemoved& v) { j = json{{"removed", v.removed}}; }
void from_json(const json& j, FileRemoved& v) { Need(j, "removed", v.removed); }

void to_json(json& j, const FileRenameRequest& v) {
  j = RequestObject(v.kOp);
  j["from"] = v.from;
  j["to"] = v.to;
  j["overwrite"] = v.overwrite;
  if (!v.xattr_prefix.empty()) j["xattrPrefix"] = v.xattr_prefix;
}
void from_json(const json& j, FileRenameRequest& v) {
  Need(j, "from", v.from);
  Need(j, "to", v.to);
  Take(j, "overwrite", v.overwrite);
  Take(j, "xattrPrefix", v.xattr_prefix);
}

void to_json(json& j, const ArchiveGetRequest& v) {
  j = PathRequest(v);
  j["gzip"] = v.gzip;
}
void from_json(const json& j, ArchiveGetRequest& v) {
  Need(j, "path", v.path);
  Take(j, "gzip", v.gzip);
}
void to_json(json& j, const ArchivePutRequest& v) {
  j = PathRequest(v);
  j["gzip"] = v.gzip;
}
void from_json(const json& j, ArchivePutRequest& v) {
  Need(j, "path", v.path);
  Take(j, "gzip", v.gzip);
}

}  // namespace kiln::proto
