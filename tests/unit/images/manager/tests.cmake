# The image manager's builder, over a fake BuildHost, its cache keys, and image
# records (kiln_images).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/build_cache_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/build_log_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/front_image_recipes_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/builder_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_record_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_storage_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upload_links_test.cc
)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images)
