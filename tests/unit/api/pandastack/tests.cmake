# PandaStack's front (kiln_api_pandastack).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/dialect_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/pandastack_test.cc
)
