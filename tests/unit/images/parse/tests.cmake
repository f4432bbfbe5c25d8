# Images, parsing part: Dockerfiles, image references, recipes, in-image paths
# (kiln_images_parse).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/dockerfile_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_path_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_ref_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/recipe_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/registry_mirror_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/registry_pattern_test.cc
)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images_parse)
