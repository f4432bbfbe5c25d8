# Layers: unpacking layer tars (libarchive), flattening layers into an image
# root of hard links, and reading OCI image layouts.
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
add_library(kiln_images_layers STATIC
  ${CMAKE_CURRENT_LIST_DIR}/fs_tree.cc
  ${CMAKE_CURRENT_LIST_DIR}/layer_tar.cc
  ${CMAKE_CURRENT_LIST_DIR}/layer_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/layer_export.cc
  ${CMAKE_CURRENT_LIST_DIR}/layer_unpack.cc
  ${CMAKE_CURRENT_LIST_DIR}/flatten.cc
  ${CMAKE_CURRENT_LIST_DIR}/oci_layout.cc
  ${CMAKE_CURRENT_LIST_DIR}/oci_config.cc)
target_link_libraries(kiln_images_layers PUBLIC
  kiln_common nlohmann_json::nlohmann_json OpenSSL::Crypto PkgConfig::LIBARCHIVE)
