# Interpreter contexts (kiln_interpreter).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/protocol_test.cc
)
