# The control plane (kiln_control), over the fake engine.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/capacity_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/egress_log_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/fair_slots_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/keys_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/metering_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_history_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/pool_sizer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/previews_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sandbox_manager_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/snapshot_catalogue_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/snapshot_transfer_service_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/usage_ledger_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/warm_pool_test.cc
)
