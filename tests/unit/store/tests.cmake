# The store (kiln_store).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/db_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/schema_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/key_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/usage_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/idempotency_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/snapshot_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/snapshot_transfer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/egress_log_store_test.cc
)
