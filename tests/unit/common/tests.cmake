# Shared helpers (kiln_common) and the contract every front and SDK keeps.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/base64_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/contract_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/json_integer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/path_ids_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/secret_box_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/strings_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/thread_nice_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/time_ids_test.cc
)
