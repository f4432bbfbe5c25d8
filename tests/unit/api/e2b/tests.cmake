# E2B's front (kiln_api_e2b): envd's Connect codec and multipart reader, and
# the control plane's routes.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/envd/connect_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/envd/file_signature_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/envd/gunzip_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/envd/paths_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/control_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dialect_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/templates_test.cc
)
