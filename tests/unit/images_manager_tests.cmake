# The image manager's builder, over a fake BuildHost, and image records (kiln_images).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/images_build_log_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/images_builder_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/images_record_test.cc)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images)
