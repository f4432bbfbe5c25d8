# The egress proxy (kiln_egress).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/gate_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy_request_test.cc
)
