# kiln's own front (kiln_api_kiln): OpenAPI document, presenters, terminal.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/openapi_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/presenters_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/terminal_test.cc
)
