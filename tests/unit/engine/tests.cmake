# The engine (kiln_engine): agent builds, agent client, memory guard, OCI spec.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/agent_binaries_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/agent_client_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/memory_guard_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/oci_spec_test.cc
)
