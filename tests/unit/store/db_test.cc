#include "store/db.h"

#include <gtest/gtest.h>

namespace kiln::store {
namespace db_test {
namespace {

TEST(DbTest, ExecQueryAndTypes) {
  Db db(":memory:");
  db.Script("CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, x REAL, note TEXT)");
  EXPECT_EQ(
      db.Exec("INSERT INTO t VALUES (?, ?, ?, ?)", {std::string("a"), int64_t{7}, 1.5, nullptr}),
      1);
  auto row = db.QueryOne("SELECT id, n, x, note FROM t WHERE id = ?", {std::string("a")});
  ASSERT_TRUE(row);
  EXPECT_EQ(row->Text(0), "a");
  EXPECT_EQ(row->Int(1), 7);
  EXPECT_DOUBLE_EQ(row->Real(2), 1.5);
  EXPECT_TRUE(row->IsNull(3));
  EXPECT_FALSE(db.QueryOne("SELECT id FROM t WHERE id = 'zz'"));
}

TEST(DbTest, UncommittedTransactionRollsBack) {
  Db db(":memory:");
  db.Script("CREATE TABLE t (n INTEGER)");
  {
    Db::Transaction tx(db);
    db.Exec("INSERT INTO t VALUES (1)");
  }
  EXPECT_EQ(db.Query("SELECT n FROM t").size(), 0u);
  {
    Db::Transaction tx(db);
    db.Exec("INSERT INTO t VALUES (2)");
    tx.Commit();
  }
  EXPECT_EQ(db.Query("SELECT n FROM t").size(), 1u);
}

TEST(DbTest, ErrorsNameTheStatement) {
  Db db(":memory:");
  try {
    db.Exec("INSERT INTO missing VALUES (1)");
    FAIL() << "no error";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
}

}  // namespace
}  // namespace db_test
}  // namespace kiln::store
