#include "common/heap.h"

#include <malloc.h>

namespace kiln::heap {

void UseOneArena() { mallopt(M_ARENA_MAX, 1); }

Stats Read() {
  struct mallinfo2 mi = mallinfo2();
  return {static_cast<int64_t>(mi.uordblks + mi.hblkhd), static_cast<int64_t>(mi.fordblks)};
}

void ReleaseFree() { malloc_trim(0); }

}  // namespace kiln::heap
