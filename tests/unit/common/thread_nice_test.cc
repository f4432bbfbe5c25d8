// ScopedThreadNice: lowers only the calling thread, and only for its scope.
#include "common/thread_nice.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace kiln {
namespace thread_nice_test {
namespace {

int NiceOfThisThread() {
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

TEST(ScopedThreadNice, LowersThisThreadForItsScope) {
  int main_before = NiceOfThisThread();
  std::thread t([&] {
    int before = NiceOfThisThread();
    {
      ScopedThreadNice lower(before + 5 > 19 ? 19 : before + 5);
      EXPECT_GT(NiceOfThisThread(), before);
    }
    // Raising it back needs CAP_SYS_NICE (kilnd runs as root); without it the
    // thread stays lower, which is the safe side.
    if (::geteuid() == 0) EXPECT_EQ(NiceOfThisThread(), before);
  });
  t.join();
  EXPECT_EQ(NiceOfThisThread(), main_before);  // other threads untouched
}

}  // namespace
}  // namespace thread_nice_test
}  // namespace kiln
