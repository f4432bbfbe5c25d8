# The agent channel protocol (kiln_proto).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/frame_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/signals_test.cc
)
