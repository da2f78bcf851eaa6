# External engines. Debian 12 packages by default; any LibTorch 2.x through CMAKE_PREFIX_PATH.
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
find_package(Gloo REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)

# hiredis ships a config file without targets: wrap it in one.
find_path(RINGTORCH_HIREDIS_INCLUDE_DIR hiredis/hiredis.h REQUIRED)
find_library(RINGTORCH_HIREDIS_LIBRARY NAMES hiredis REQUIRED)
if(NOT TARGET ringtorch_hiredis)
  add_library(ringtorch_hiredis INTERFACE IMPORTED)
  set_target_properties(ringtorch_hiredis PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${RINGTORCH_HIREDIS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${RINGTORCH_HIREDIS_LIBRARY}")
endif()

# Gloo's imported target carries no include directory on Debian.
if(GLOO_INCLUDE_DIRS)
  set_property(TARGET gloo APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${GLOO_INCLUDE_DIRS}")
endif()

# TORCH_CXX_FLAGS carries the C++ ABI define; the imported target already holds it.
message(STATUS "ringtorch: LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}")
