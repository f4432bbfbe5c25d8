# I/O into sandboxes for the fronts (kiln_io).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/io_test.cc
)
