# Images, layers part: unpacking, flattening, OCI layouts. The tests write
# their tars with libarchive and run gzip, zstd and (if present) umoci.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/layer_unpack_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/layer_writer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/flatten_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/layer_export_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/oci_layout_test.cc
)
target_link_libraries(kiln_unit_tests PRIVATE kiln_images_layers)
