# The image manager's builder, over a fake BuildHost (kiln_images).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/images_builder_test.cc)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images)
