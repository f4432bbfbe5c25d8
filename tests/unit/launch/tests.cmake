# The launch path (kiln_launch), over the fake engine.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/launcher_test.cc
)
