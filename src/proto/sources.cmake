# The agent protocol's sources: kiln_proto (src/proto) for kilnd, the CLI and
# the tests, and kiln_agent_proto (src/agent), built without sanitizers for
# the static agent.
set(KILN_PROTO_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/frame.cc
  ${CMAKE_CURRENT_LIST_DIR}/../common/base64.cc
  ${CMAKE_CURRENT_LIST_DIR}/signals.cc
  ${CMAKE_CURRENT_LIST_DIR}/ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/ops_files.cc
  ${CMAKE_CURRENT_LIST_DIR}/ops_watch.cc)
