// The pure parts of the agent's file watches: folding, rename pairing,
// filters, and the ring's cursors and bounds.
#include "agent/watch_events.h"

#include <sys/inotify.h>

#include <gtest/gtest.h>

namespace kiln::agent {
namespace {

RawChange Raw(uint32_t mask, const std::string& path, uint32_t cookie = 0, bool dir = false) {
  return RawChange{.mask = mask, .cookie = cookie, .path = path, .is_dir = dir};
}

EventBatch Batch(std::vector<std::string> include = {}, std::vector<std::string> exclude = {},
                 std::vector<std::string> types = {}) {
  return EventBatch(WatchFilter("/w", std::move(types), std::move(include), std::move(exclude)),
                    nullptr);
}

TEST(WatchBatch, FoldsWritesPerPathWithACount) {
  auto b = Batch();
  b.Add(Raw(IN_CREATE, "/w/a"));
  for (int i = 0; i < 5; ++i) b.Add(Raw(IN_MODIFY, "/w/a"));
  b.Add(Raw(IN_MODIFY, "/w/b"));
  b.Add(Raw(IN_MODIFY, "/w/a"));
  auto events = b.Flush();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, "create");
  EXPECT_EQ(events[1].type, "write");
  EXPECT_EQ(events[1].path, "/w/a");
  EXPECT_EQ(events[1].count, 6u);
  EXPECT_EQ(events[2].path, "/w/b");
  EXPECT_EQ(events[2].count, 1u);
  EXPECT_TRUE(b.Flush().empty());
}

TEST(WatchBatch, AWriteAfterAnotherEventStartsAgain) {
  auto b = Batch();
  b.Add(Raw(IN_MODIFY, "/w/a"));
  b.Add(Raw(IN_DELETE, "/w/a"));
  b.Add(Raw(IN_CREATE, "/w/a"));
  b.Add(Raw(IN_MODIFY, "/w/a"));
  auto events = b.Flush();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].type, "write");
  EXPECT_EQ(events[3].count, 1u);
}

TEST(WatchBatch, FoldsAcrossBatchesNever) {
  auto b = Batch();
  b.Add(Raw(IN_MODIFY, "/w/a"));
  EXPECT_EQ(b.Flush()[0].count, 1u);
  b.Add(Raw(IN_MODIFY, "/w/a"));
  EXPECT_EQ(b.Flush()[0].count, 1u);
}

TEST(WatchBatch, PairsMovesByCookie) {
  auto b = Batch();
  b.Add(Raw(IN_MOVED_FROM, "/w/old", 7));
  b.Add(Raw(IN_MOVED_FROM, "/w/x", 8));
  b.Add(Raw(IN_MOVED_TO, "/w/new", 7));
  b.Add(Raw(IN_MOVED_TO, "/w/in", 9));  // from outside
  auto events = b.Flush();              // x moved out
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, "rename");
  EXPECT_EQ(events[0].path, "/w/new");
  EXPECT_EQ(events[0].old_path, "/w/old");
  EXPECT_EQ(events[1].type, "create");
  EXPECT_EQ(events[1].path, "/w/in");
  EXPECT_EQ(events[2].type, "remove");
  EXPECT_EQ(events[2].path, "/w/x");
}

TEST(WatchBatch, DropsAChmodAfterItsCreateAndASecondCreate) {
  auto b = Batch();
  b.Add(Raw(IN_CREATE, "/w/a"));
  b.Add(Raw(IN_ATTRIB, "/w/a"));
  b.Add(Raw(IN_CREATE, "/w/a"));  // a scan racing inotify
  b.Add(Raw(IN_ATTRIB, "/w/b"));
  auto events = b.Flush();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "create");
  EXPECT_EQ(events[1].type, "chmod");
}

TEST(WatchBatch, ResolvedEventsReachTheWatchEvenFilteredOut) {
  std::vector<std::string> seen;
  EventBatch b(WatchFilter("/w", {"write"}, {}, {}),
               [&](const proto::WatchEvent& e) { seen.push_back(e.type + " " + e.path); });
  b.Add(Raw(IN_CREATE, "/w/d", 0, true));
  b.Add(Raw(IN_MOVED_FROM, "/w/d", 3, true));
  b.Add(Raw(IN_MOVED_TO, "/w/e", 3, true));
  EXPECT_TRUE(b.Flush().empty());  // only writes kept
  EXPECT_EQ(seen, (std::vector<std::string>{"create /w/d", "rename /w/e"}));
}

TEST(WatchFilter, ExcludeHidesATreeIncludeKeepsNames) {
  WatchFilter f("/w", {}, {"*.py"}, {"node_modules", "build/*.o"});
  auto ev = [](std::string p) { return proto::WatchEvent{.type = "create", .path = std::move(p)}; };
  EXPECT_TRUE(f.Keep(ev("/w/a.py")));
  EXPECT_TRUE(f.Keep(ev("/w/src/b.py")));
  EXPECT_FALSE(f.Keep(ev("/w/a.txt")));
  EXPECT_FALSE(f.Keep(ev("/w/node_modules/x.py")));
  EXPECT_FALSE(f.Keep(ev("/w/src/node_modules/x/y.py")));
  EXPECT_TRUE(f.Excluded("/w/node_modules"));
  EXPECT_FALSE(f.Excluded("/w"));
  EXPECT_TRUE(f.Excluded("/w/build/m.o"));
  EXPECT_FALSE(f.Excluded("/w/build"));
  WatchFilter types("/", {"remove"}, {}, {});
  EXPECT_FALSE(types.Keep(ev("/a")));
  EXPECT_TRUE(types.Keep(proto::WatchEvent{.type = "remove", .path = "/a"}));
}

TEST(WatchRing, CursorsAreSequenceNumbers) {
  WatchRing r(100, 1 << 20);
  for (int i = 0; i < 5; ++i)
    r.PushEvent(proto::WatchEvent{.type = "create", .path = "/f" + std::to_string(i)});
  r.PushNotice(proto::WatchNotice{.kind = "end", .reason = "stopped"});
  EXPECT_EQ(r.first(), 0u);
  EXPECT_EQ(r.end(), 6u);
  uint64_t dropped = 9;
  auto items = r.Read(2, 100, 1 << 20, &dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].seq, 2u);
  EXPECT_EQ(items[0].event->path, "/f2");
  EXPECT_EQ(items[3].notice->kind, "end");
  EXPECT_EQ(r.Read(2, 2, 1 << 20, &dropped).size(), 2u);
  EXPECT_TRUE(r.Read(6, 100, 1 << 20, &dropped).empty());
}

TEST(WatchRing, DropsTheOldestPastItsBoundsAndSaysHowMany) {
  WatchRing r(10, 1 << 20);
  for (int i = 0; i < 25; ++i) r.PushEvent(proto::WatchEvent{.type = "write", .path = "/p"});
  EXPECT_EQ(r.first(), 15u);
  EXPECT_EQ(r.end(), 25u);
  uint64_t dropped = 0;
  auto items = r.Read(3, 100, 1 << 20, &dropped);
  EXPECT_EQ(dropped, 12u);
  ASSERT_EQ(items.size(), 10u);
  EXPECT_EQ(items[0].seq, 15u);

  WatchRing small(1000, 1000);  // bytes bound: ~64 + path each
  for (int i = 0; i < 100; ++i)
    small.PushEvent(proto::WatchEvent{.type = "write", .path = std::string(100, 'x')});
  EXPECT_LE(small.bytes(), 1000u);
  EXPECT_EQ(small.end() - small.first(), 1000u / (64 + 100));
}

}  // namespace
}  // namespace kiln::agent
