// kilnd's own heap, for operators and the soak: what malloc holds, and a way
// to hand freed pages back. kilnd serves each request on its own thread, so
// glibc spreads allocations over several arenas; memory freed in an arena
// stays in kilnd's RSS until it is trimmed.
#pragma once

#include <cstdint>

namespace kiln::heap {

struct Stats {
  int64_t in_use_bytes = 0;  // allocated and not yet freed (incl. mmapped blocks)
  int64_t free_bytes = 0;    // freed but still held by malloc's arenas
};

// Allocations of every thread from malloc's main arena (mallopt M_ARENA_MAX
// 1): one arena's freed pages can be counted (mallinfo2 sees only the main
// arena) and trimmed. Per-thread caches (tcache) keep small allocations off
// the arena lock. Call first thing in main, before any thread starts.
void UseOneArena();

Stats Read();

// Returns free pages at the top and inside every arena to the kernel
// (malloc_trim). Cheap enough to call once a minute.
void ReleaseFree();

}  // namespace kiln::heap
