# Build contexts, COPY/ADD, .dockerignore and image users (kiln::images).
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
add_library(kiln_images_context STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/build_context.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/copy_step.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/dockerignore.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/image_users.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/safe_path.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tar_extract.cc)
target_include_directories(kiln_images_context PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(kiln_images_context PUBLIC kiln_common OpenSSL::Crypto PkgConfig::LIBARCHIVE)
