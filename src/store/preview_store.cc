#include "store/preview_store.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "common/digest.h"
#include "common/ids.h"
#include "common/time.h"

namespace kiln::store {

namespace {

std::string RandomHex(int words) {
  std::string out;
  for (int i = 0; i < words; ++i) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, RandomU64());
    out += buf;
  }
  return out;
}

PreviewRecord PreviewFromRow(const DbRow& r) {
  PreviewRecord p;
  p.sandbox_id = r.Text(0);
  p.port = static_cast<int>(r.Int(1));
  p.id = r.Text(2);
  p.is_public = r.Text(3) == "public";
  p.secret = r.Text(4);
  p.ttl_ms = r.Int(5);
  p.created_ms = r.Int(6);
  return p;
}

constexpr char kPreviewColumns[] = "sandbox_id, port, id, visibility, secret, ttl_ms, created_ms";

std::string Mac(const PreviewRecord& p, int64_t expiry_ms) {
  return HmacSha256Hex(
      p.secret, p.sandbox_id + "|" + std::to_string(p.port) + "|" + std::to_string(expiry_ms));
}

}  // namespace

PreviewRecord PreviewStore::Put(const std::string& sandbox_id, int port, bool is_public,
                                int64_t ttl_ms) {
  Db::Transaction tx(db_);
  if (auto old = Get(sandbox_id, port)) {
    db_.Exec("UPDATE previews SET visibility = ?, ttl_ms = ? WHERE sandbox_id = ? AND port = ?",
             {std::string(is_public ? "public" : "private"), ttl_ms, sandbox_id,
              static_cast<int64_t>(port)});
  } else {
    db_.Exec(
        std::string("INSERT INTO previews (") + kPreviewColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?)",
        {sandbox_id, static_cast<int64_t>(port), "pv_" + RandomHex(2).substr(0, 24),
         std::string(is_public ? "public" : "private"), RandomHex(4), ttl_ms, NowMs()});
  }
  PreviewRecord p = *Get(sandbox_id, port);
  tx.Commit();
  return p;
}

std::optional<PreviewRecord> PreviewStore::Get(const std::string& sandbox_id, int port) const {
  auto row = db_.QueryOne(
      std::string("SELECT ") + kPreviewColumns + " FROM previews WHERE sandbox_id = ? AND port = ?",
      {sandbox_id, static_cast<int64_t>(port)});
  if (!row) return std::nullopt;
  return PreviewFromRow(*row);
}

std::vector<PreviewRecord> PreviewStore::List(const std::string& sandbox_id) const {
  std::vector<PreviewRecord> out;
  for (const auto& row : db_.Query(std::string("SELECT ") + kPreviewColumns +
                                       " FROM previews WHERE sandbox_id = ? ORDER BY port",
                                   {sandbox_id}))
    out.push_back(PreviewFromRow(row));
  return out;
}

bool PreviewStore::Rotate(const std::string& sandbox_id, int port) {
  return db_.Exec("UPDATE previews SET secret = ? WHERE sandbox_id = ? AND port = ?",
                  {RandomHex(4), sandbox_id, static_cast<int64_t>(port)}) > 0;
}

bool PreviewStore::Delete(const std::string& sandbox_id, int port) {
  return db_.Exec("DELETE FROM previews WHERE sandbox_id = ? AND port = ?",
                  {sandbox_id, static_cast<int64_t>(port)}) > 0;
}

void PreviewStore::DeleteSandbox(const std::string& sandbox_id) {
  db_.Exec("DELETE FROM previews WHERE sandbox_id = ?", {sandbox_id});
}

std::string PreviewStore::Token(const PreviewRecord& p, int64_t expiry_ms) {
  return std::to_string(expiry_ms) + "." + Mac(p, expiry_ms);
}

bool PreviewStore::TokenValid(const PreviewRecord& p, const std::string& token, int64_t now_ms) {
  size_t dot = token.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 19) return false;
  int64_t expiry = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + dot, expiry);
  if (ec != std::errc() || end != token.data() + dot || expiry <= now_ms) return false;
  return ConstantTimeEquals(std::string_view(token).substr(dot + 1), Mac(p, expiry));
}

}  // namespace kiln::store
