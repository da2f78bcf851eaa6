# External engines. Debian 12 packages by default; any LibTorch 2.x through CMAKE_PREFIX_PATH.
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)  # the logger behind base/log.h (Debian's libspdlog-dev)
find_package(CLI11 REQUIRED)   # every program's command line (Debian's libcli11-dev)

# hiredis ships a config file without targets: wrap it in one.
find_path(RINGTORCH_HIREDIS_INCLUDE_DIR hiredis/hiredis.h REQUIRED)
find_library(RINGTORCH_HIREDIS_LIBRARY NAMES hiredis REQUIRED)
if(NOT TARGET ringtorch_hiredis)
  add_library(ringtorch_hiredis INTERFACE IMPORTED)
  set_target_properties(ringtorch_hiredis PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${RINGTORCH_HIREDIS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${RINGTORCH_HIREDIS_LIBRARY}")
endif()

include(cmake/Gloo.cmake)

# A LibTorch built with CUDA (the PyTorch wheel's) lists its CUDA libraries here; Debian's has none.
if(TORCH_CUDA_LIBRARIES)
  set(RINGTORCH_TORCH_CUDA ON)
else()
  set(RINGTORCH_TORCH_CUDA OFF)
endif()
message(STATUS "ringtorch: LibTorch with CUDA: ${RINGTORCH_TORCH_CUDA}")

# TORCH_CXX_FLAGS carries the C++ ABI define; the imported target already holds it.
message(STATUS "ringtorch: LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}")

# PLplot draws ringtrain's --plot pictures (apps/plot). Optional: without it, --plot says how to
# get it; scripts/setup.sh installs libplplot-dev.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(RINGTORCH_PLPLOT QUIET IMPORTED_TARGET plplot)
endif()
if(RINGTORCH_PLPLOT_FOUND)
  message(STATUS "ringtorch: PLplot ${RINGTORCH_PLPLOT_VERSION}: ringtrain --plot draws SVG")
else()
  message(STATUS "ringtorch: PLplot not found (libplplot-dev): ringtrain --plot unavailable")
endif()
