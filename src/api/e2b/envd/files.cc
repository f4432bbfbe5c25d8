// envd's HTTP file routes, over kiln's streaming file transfers:
//   GET  /files?path=&username=  the file's bytes
//   POST /files?path=&username=  multipart/form-data (each part with a
//        filename is a file: at `path` when given, else at its filename),
//        or application/octet-stream (the body is the file at `path`),
//        either gzip'ed under Content-Encoding: gzip; answers
//        [{"name","type","path","metadata"?}] for what was written.
// Each X-Metadata-<key> header is the files' metadata (envd 0.6.2): kept as
// the attribute user.e2b.<key, lowercased>, and an upload replaces what
// the file had (one with none clears it).
// Both directions stream, a piece at a time: the agent's flow control
// slows a fast sender down rather than kilnd piling the file up. Errors are
// E2B's JSON ({"code": 404, "message": ...}).
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "api/e2b/envd/gunzip.h"
#include "api/e2b/envd/rpc.h"
#include "api/errors.h"
#include "api/multipart.h"
#include "api/utf8.h"

namespace kiln::api::e2b {
namespace {

using nlohmann::json;

// How long the sandbox may take for the next piece of a download.
constexpr int kDownloadPieceMs = 60000;
constexpr int kUploadMode = 0644;
constexpr std::string_view kMetadataHeader = "x-metadata-";
// envd's bounds: a key within the xattr name limit less the prefix, and
// all of a file's metadata (each key with its prefix, plus its value)
// within one inode's attribute space.
constexpr size_t kMaxMetadataKey = 246;
constexpr size_t kMaxMetadataBytes = 4096;

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool PrintableAscii(std::string_view s) {
  for (char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

// The upload's metadata from its X-Metadata-* headers (the first of a
// repeated key), checked as envd checks it.
io::XattrWrite MetadataOf(const Exchange& ex) {
  io::XattrWrite metadata{.prefix = std::string(kEnvdMetadataXattrPrefix)};
  size_t bytes = 0;
  for (const auto& [name, value] : ex.Headers()) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!lower.starts_with(kMetadataHeader)) continue;
    std::string key = lower.substr(kMetadataHeader.size());
    std::string field = "header." + name.substr(0, 64);
    if (key.empty()) throw InvalidField(field, "names no metadata key");
    if (key.size() > kMaxMetadataKey)
      throw InvalidField(field, "names a key over " + std::to_string(kMaxMetadataKey) + " bytes");
    if (!PrintableAscii(key) || !PrintableAscii(value))
      throw InvalidField(field, "must be printable US-ASCII, key and value");
    if (!metadata.values.emplace(key, value).second) continue;
    bytes += kEnvdMetadataXattrPrefix.size() + key.size() + value.size();
    if (bytes > kMaxMetadataBytes || metadata.values.size() > proto::kMaxXattrs)
      throw InvalidField(field, "takes the file's metadata past " +
                                    std::to_string(kMaxMetadataBytes) + " bytes or " +
                                    std::to_string(proto::kMaxXattrs) + " keys");
  }
  return metadata;
}

json WrittenJson(const std::string& path, const io::XattrWrite& metadata) {
  json out{{"name", SanitizeUtf8(BaseName(path))}, {"type", "file"}, {"path", SanitizeUtf8(path)}};
  if (!metadata.values.empty()) out["metadata"] = metadata.values;
  return out;
}

// Makes the file's directories, as envd does, and opens it for writing.
io::FileUpload OpenUpload(const io::SandboxIo& io, const std::string& path,
                          const io::XattrWrite& metadata) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) ValueOrThrow(io.Mkdir(path.substr(0, slash), true));
  // In place, as envd writes: a watcher sees this file written.
  return io.WriteFile(path, kUploadMode, io::WritePlacement::kInPlace, metadata);
}

// The body as it came or, under Content-Encoding: gzip, inflated: each
// piece to `sink`. False when the client's body broke off.
bool ReadBody(Exchange& ex, const Gunzip::Sink& sink) {
  std::string enc = ex.Header("Content-Encoding");
  bool gzip = enc == "gzip" || enc == "x-gzip";
  if (!gzip && !enc.empty() && enc != "identity")
    throw ApiError(Code::kNotSupported, "Content-Encoding '" + enc.substr(0, 32) +
                                            "' is not supported: send gzip or the file as it is");
  std::optional<Gunzip> gunzip;
  if (gzip) gunzip.emplace(sink);
  std::string chunk;
  while (ex.ReadBodyChunk(&chunk)) ThrowIfError(gunzip ? gunzip->Feed(chunk) : sink(chunk));
  if (ex.body_error()) return false;
  if (gunzip) ThrowIfError(gunzip->Finish());
  return true;
}

void Download(ApiContext& ctx, Exchange& ex, const SandboxTarget& t, const EnvdUser& user) {
  std::string path = ResolvePath(user, ex.Query("path").value_or(""), "query.path");
  io::SandboxIo io = RunningIo(ctx, ex, *t.sandbox);
  auto stream_slot = OpenStream(ctx, *t.sandbox);
  io::Download file = ValueOrThrow(io.ReadFile(path));
  std::string name = BaseName(path);
  std::string quoted;
  for (char c : name) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) continue;
    quoted += c;
  }
  if (!ex.BeginStream(200, "application/octet-stream",
                      {{"Content-Disposition", "attachment; filename=\"" + quoted + "\""}}))
    return file.Cancel();
  std::string chunk;
  while (file.Next(&chunk, kDownloadPieceMs)) {
    if (!ex.WriteChunk(chunk)) return file.Cancel();
  }
  // A short file must not look whole: the client sees a broken transfer.
  if (!file.status().ok()) return ex.AbortStream();
  ex.EndStream();
}

// Each part with a filename becomes a file, written as it arrives.
class UploadParts final : public MultipartReader::Handler {
 public:
  UploadParts(const io::SandboxIo& io, const EnvdUser& user, std::optional<std::string> path,
              const io::XattrWrite& metadata)
      : io_(io), user_(user), path_(std::move(path)), metadata_(metadata) {}
  ~UploadParts() override {
    if (upload_) upload_->Cancel();
  }

  Status OnPartBegin(const MultipartReader::Part& part) override {
    if (!part.has_filename) return Status::Ok();  // a plain field: not a file
    try {
      current_ = path_ ? *path_ : ResolvePath(user_, part.filename, "multipart.filename");
      upload_.emplace(OpenUpload(io_, current_, metadata_));
    } catch (const ApiError& e) {
      return e.status();
    }
    return Status::Ok();
  }
  Status OnPartData(std::string_view bytes) override {
    if (!upload_) return Status::Ok();
    return upload_->Write(bytes);
  }
  Status OnPartEnd() override {
    if (!upload_) return Status::Ok();
    auto done = upload_->Finish();
    upload_.reset();
    if (!done.ok()) return done.status();
    written_.push_back(WrittenJson(current_, metadata_));
    return Status::Ok();
  }
  const json& written() const { return written_; }

 private:
  const io::SandboxIo& io_;
  const EnvdUser& user_;
  std::optional<std::string> path_;
  const io::XattrWrite& metadata_;
  std::string current_;
  std::optional<io::FileUpload> upload_;
  json written_ = json::array();
};

void Upload(ApiContext& ctx, Exchange& ex, const SandboxTarget& t, const EnvdUser& user) {
  std::optional<std::string> path;
  if (auto p = ex.Query("path"); p && !p->empty()) path = ResolvePath(user, *p, "query.path");
  const io::XattrWrite metadata = MetadataOf(ex);
  std::string content_type = ex.Header("Content-Type");
  io::SandboxIo io = RunningIo(ctx, ex, *t.sandbox);
  if (content_type.starts_with("application/octet-stream")) {
    if (!path) throw InvalidField("query.path", "is required for an application/octet-stream body");
    io::FileUpload upload = OpenUpload(io, *path, metadata);
    bool whole = false;
    try {
      whole = ReadBody(ex, [&](std::string_view piece) { return upload.Write(piece); });
    } catch (...) {
      upload.Cancel();
      throw;
    }
    if (!whole) {
      upload.Cancel();
      throw ApiError(Code::kUploadIncomplete, "the upload broke off before its end");
    }
    ValueOrThrow(upload.Finish());
    return ex.SendJson(200, json::array({WrittenJson(*path, metadata)}));
  }
  std::string boundary = ValueOrThrow(MultipartReader::BoundaryOf(content_type));
  UploadParts parts(io, user, path, metadata);
  MultipartReader reader(boundary, &parts);
  if (!ReadBody(ex, [&](std::string_view piece) { return reader.Feed(piece); }))
    throw ApiError(Code::kUploadIncomplete, "the upload broke off before its end");
  ThrowIfError(reader.Finish());
  if (parts.written().empty())
    throw ApiError(Code::kInvalidRequest,
                   "the multipart body holds no file (no part has a filename)");
  ex.SendJson(200, parts.written());
}

}  // namespace

void ServeFiles(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  EnvdUser user = ex.Query("username") ? UserFromName(*ex.Query("username"), *t.sandbox)
                                       : UserOf(ex, *t.sandbox);
  if (ex.method() == "GET") return Download(ctx, ex, t, user);
  if (ex.method() == "POST") return Upload(ctx, ex, t, user);
  throw ApiError(Code::kMethodNotAllowed, "envd's /files takes GET or POST, not " + ex.method());
}

}  // namespace kiln::api::e2b
