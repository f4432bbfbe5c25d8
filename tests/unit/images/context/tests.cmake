# Build contexts, COPY/ADD, .dockerignore and image users (kiln_images_context).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/build_context_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/copy_step_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dockerignore_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_users_test.cc
)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images_context)
# The .dockerignore cases the SDKs' tests share (tests/data/dockerignore_cases.json).
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/dockerignore_test.cc APPEND PROPERTY
  COMPILE_DEFINITIONS KILN_TEST_DATA_DIR="${CMAKE_SOURCE_DIR}/tests/data")
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/dockerignore_test.cc PROPERTY
  SKIP_UNITY_BUILD_INCLUSION ON)
