# The kiln CLI (kiln_cli_lib), most of it against a fake daemon.
target_sources(kiln_unit_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/args_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_client_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/output_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/keys_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/commands_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/commands_daemon_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/completion_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/progress_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tunnel_test.cc
)
