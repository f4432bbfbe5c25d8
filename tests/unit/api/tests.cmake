# The HTTP layer every front shares (kiln_api).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/context_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/auth_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/errors_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/front_dialect_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/front_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_server_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/json_body_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/multipart_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/ports_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/rate_limit_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/request_target_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/router_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/terminal_tickets_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/utf8_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/validate_test.cc
)
