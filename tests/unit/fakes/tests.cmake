# The fakes in tests/fakes that the other tests stand on.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/fakes_test.cc
)
