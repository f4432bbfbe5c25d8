# Daytona's front (kiln_api_daytona).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/daytona_test.cc
)
