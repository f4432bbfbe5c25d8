# The web console's files (kiln_api_console).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/console_files_test.cc
)
