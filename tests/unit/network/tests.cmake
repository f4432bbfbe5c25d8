# Network policy (kiln_network).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/address_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/internal_endpoints_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/policy_test.cc
)
