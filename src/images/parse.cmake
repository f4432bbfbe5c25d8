# Pure parsing for images: Dockerfiles, image references, recipes.
add_library(kiln_images_parse STATIC
  ${CMAKE_CURRENT_LIST_DIR}/dockerfile.cc
  ${CMAKE_CURRENT_LIST_DIR}/dockerfile_lex.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_ref.cc
  ${CMAKE_CURRENT_LIST_DIR}/recipe.cc
)
# kiln_proto for base64 (recipe files given as base64).
target_link_libraries(kiln_images_parse PUBLIC kiln_common nlohmann_json::nlohmann_json PRIVATE kiln_proto)
target_include_directories(kiln_images_parse PUBLIC ${CMAKE_SOURCE_DIR}/src)
