# The agent (src/agent): its files belong to the kiln-agent executable, not a
# library, so the ones under test are compiled in here.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/command_drain_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/output_ring_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/watch_events_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/xattrs_test.cc
)
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_SOURCE_DIR}/src/agent/command.cc
  ${CMAKE_SOURCE_DIR}/src/agent/event_loop.cc
  ${CMAKE_SOURCE_DIR}/src/agent/output_ring.cc
  ${CMAKE_SOURCE_DIR}/src/agent/proc_scan.cc
  ${CMAKE_SOURCE_DIR}/src/agent/spawn.cc
  ${CMAKE_SOURCE_DIR}/src/agent/watch_events.cc
  ${CMAKE_SOURCE_DIR}/src/agent/xattrs.cc
)
