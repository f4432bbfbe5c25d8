# The image manager: builds (each RUN a kiln sandbox), pulls, storage, warm
# copies. Above the control plane, below the API.
add_library(kiln_images STATIC
  build_log.cc builder.cc image_build_host.cc image_manager.cc image_queries.cc image_storage.cc image_transfer.cc image_warm.cc
  registry_network.cc)
target_link_libraries(kiln_images PUBLIC
  kiln_images_parse kiln_images_layers kiln_images_context kiln_control kiln_proto kiln_store kiln_common)
