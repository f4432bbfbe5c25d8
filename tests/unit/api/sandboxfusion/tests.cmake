# SandboxFusion's front (kiln_api_sandboxfusion): bodies, languages, verdicts.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/dialect_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sandboxfusion_test.cc
)
