# Images, parsing part: Dockerfiles, image references, recipes (kiln_images_parse).
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/images_dockerfile_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/images_ref_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/images_recipe_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/images_registry_pattern_test.cc
)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images_parse)
