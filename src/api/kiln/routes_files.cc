// Files: /v1/sandboxes/{id}/files/{content,list,stat,archive} and
// files:{mkdir,remove,rename}.
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "common/digest.h"
#include "images/context/dockerignore.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxFile = 256ull << 20;
constexpr uint64_t kMaxArchive = 1ull << 30;
// Files up to this size are buffered so the answer can carry a checksum.
constexpr uint64_t kHashedFile = 8ull << 20;

// Feeds the request body to the sandbox; returns bytes sent.
uint64_t PumpBody(Exchange& ex, io::Upload& to, uint64_t max, std::string first = "") {
  uint64_t total = 0;
  std::string chunk = std::move(first);
  do {
    total += chunk.size();
    if (total > max) {
      to.Cancel();
      throw ApiError(Code::kPayloadTooLarge,
                     "the body is larger than " + std::to_string(max) + " bytes");
    }
    ThrowIfError(to.Write(chunk));
  } while (ex.ReadBodyChunk(&chunk));
  if (ex.body_error()) {
    to.Cancel();
    throw ApiError(Code::kInvalidRequest, "body: the upload ended early");
  }
  return total;
}

void ReadContent(ApiContext& ctx, const control::Sandbox& s, Exchange& ex,
                 const io::SandboxIo& sandbox, const std::string& path) {
  io::Download file = ValueOrThrow(sandbox.ReadFile(path));
  std::vector<std::pair<std::string, std::string>> headers = {
      {"x-content-length", std::to_string(file.size())}};
  bool buffered = file.size() <= kHashedFile;
  // A streamed download is a long-lived stream; a buffered one is brief.
  std::shared_ptr<void> stream_slot;
  if (!buffered) {
    try {
      stream_slot = OpenStream(ctx, s);
    } catch (const ApiError&) {
      file.Cancel();
      throw;
    }
  }
  if (!buffered && !ex.BeginStream(200, "application/octet-stream", headers)) return file.Cancel();
  // A file is read as long as it was when opened (Download cuts it
  // there) and the agent refuses what is not a regular file, so whatever an
  // agent (which root inside may replace) sends, kilnd buffers at most
  // kHashedFile.
  std::string data, chunk;
  while (file.Next(&chunk, 60000)) {
    if (buffered) {
      data += chunk;
    } else if (!ex.WriteChunk(chunk)) {
      return file.Cancel();
    }
  }
  if (!buffered) {
    if (file.status().ok()) return ex.EndStream();
    return ex.AbortStream();
  }
  ThrowIfError(file.status());
  headers = {{"x-content-length", std::to_string(data.size())},
             {"x-content-sha256", Sha256Hex(data)}};
  ex.SendBytes(200, data, "application/octet-stream", headers);
}

// `path` relative to the listed folder `base` ("a/b.txt"); empty for the
// folder itself or a path outside it.
std::string_view RelativeTo(std::string_view base, std::string_view path) {
  while (base.size() > 1 && base.back() == '/') base.remove_suffix(1);
  if (base == "/") return path.size() > 1 && path[0] == '/' ? path.substr(1) : std::string_view();
  if (path.size() <= base.size() + 1 || path.substr(0, base.size()) != base ||
      path[base.size()] != '/')
    return {};
  return path.substr(base.size() + 1);
}

bool HasHiddenSegment(std::string_view rel) {
  for (size_t start = 0; start < rel.size();) {
    if (rel[start] == '.') return true;
    size_t slash = rel.find('/', start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

}  // namespace

void AddFileRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/sandboxes/{id}/files/content", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    ReadContent(ctx, *s, ex, RunningIo(ctx, ex, *s), path);
  });

  r.Add("PUT", "/v1/sandboxes/{id}/files/content", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    int mode = ReadFileMode(ex);
    if (auto n = ex.content_length(); n && *n > kMaxFile)
      throw ApiError(Code::kPayloadTooLarge,
                     "files are at most 256 MiB; use files/archive for trees");
    io::FileUpload file = RunningIo(ctx, ex, *s).WriteFile(path, mode);
    uint64_t sent = PumpBody(ex, file, kMaxFile);
    if (ValueOrThrow(file.Finish()) != sent)
      throw ApiError(Code::kInternal, "size mismatch writing " + path);
    ex.SendJson(200, FileWrittenJson(path, sent));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/list", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    FileListQuery q = ReadFileList(ex);
    json data = json::array();
    bool truncated = false;
    for (const auto& e : ValueOrThrow(RunningIo(ctx, ex, *s).List(q.path, q.levels))) {
      std::string_view rel = RelativeTo(q.path, e.path);
      if (!q.hidden && HasHiddenSegment(rel)) continue;
      if (q.glob && !images::GlobMatch(*q.glob, rel)) continue;
      if (q.limit && data.size() >= static_cast<size_t>(*q.limit)) {
        truncated = true;
        break;
      }
      data.push_back(FileEntryJson(e));
    }
    ex.SendJson(200,
                FileListJson(std::move(data), q.limit ? std::optional(truncated) : std::nullopt));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/stat", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    ex.SendJson(200, FileStatJson(ValueOrThrow(RunningIo(ctx, ex, *s).Stat(path))));
  });

  r.Add("POST", "/v1/sandboxes/{id}/files:mkdir", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    MkdirRequest req = ReadMkdir(ex.JsonBody());
    ex.SendJson(200,
                FileEntryJson(ValueOrThrow(RunningIo(ctx, ex, *s).Mkdir(req.path, req.parents))));
  });

  r.Add("POST", "/v1/sandboxes/{id}/files:remove", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    RemoveRequest req = ReadRemove(ex.JsonBody());
    bool removed = ValueOrThrow(RunningIo(ctx, ex, *s).Remove(req.path, req.recursive));
    ex.SendJson(200, json{{"removed", removed}});
  });

  r.Add("POST", "/v1/sandboxes/{id}/files:rename", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    RenameRequest req = ReadRename(ex.JsonBody());
    ex.SendJson(200, FileEntryJson(ValueOrThrow(
                         RunningIo(ctx, ex, *s).Rename(req.from, req.to, req.overwrite))));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/archive", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    bool gzip = ex.Query("gzip").value_or("false") == "true";
    auto stream_slot = OpenStream(ctx, *s);
    io::Download tar = ValueOrThrow(RunningIo(ctx, ex, *s).ArchiveGet(path, gzip));
    if (!ex.BeginStream(200, gzip ? "application/gzip" : "application/x-tar")) return tar.Cancel();
    std::string chunk;
    while (tar.Next(&chunk, 120000)) {
      if (!ex.WriteChunk(chunk)) return tar.Cancel();
    }
    // A tar that failed half-way must not look like a short archive.
    if (tar.status().ok()) return ex.EndStream();
    ex.AbortStream();
  });

  r.Add("PUT", "/v1/sandboxes/{id}/files/archive", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    if (auto n = ex.content_length(); n && *n > kMaxArchive)
      throw ApiError(Code::kPayloadTooLarge, "archives are at most 1 GiB");
    std::string first;
    ex.ReadBodyChunk(&first);
    bool gzip = first.size() >= 2 && static_cast<unsigned char>(first[0]) == 0x1f &&
                static_cast<unsigned char>(first[1]) == 0x8b;
    io::ArchiveUpload tar = ValueOrThrow(RunningIo(ctx, ex, *s).ArchivePut(path, gzip));
    uint64_t sent = PumpBody(ex, tar, kMaxArchive, std::move(first));
    io::ArchiveUnpacked done = ValueOrThrow(tar.Finish());
    if (done.exit.exit_code != 0) {
      // A full disk is not a bad archive: tar says ENOSPC, or (gVisor's
      // overlay on a full host disk) that a write came up short.
      const std::string& said = done.stderr_head;
      if (said.find("No space left on device") != std::string::npos ||
          said.find("Disk quota exceeded") != std::string::npos ||
          said.find("Wrote only") != std::string::npos)
        throw ApiError(Code::kNoSpace,
                       "no space left to unpack the archive into " + path + ": " + said,
                       json{{"path", path}});
      throw ApiError(Code::kInvalidArchive, "the archive could not be unpacked: " + said);
    }
    if (done.exit.stdin_bytes != sent)
      throw ApiError(Code::kUploadIncomplete, "the sandbox took " +
                                                  std::to_string(done.exit.stdin_bytes) + " of " +
                                                  std::to_string(sent) + " bytes");
    ex.SendJson(200, ArchiveUnpackedJson(path, sent));
  });
}

}  // namespace kiln::api::v1
