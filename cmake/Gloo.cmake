# Which Gloo ringtorch links (RINGTORCH_GLOO_PROVIDER), and why it matters: a process must not
# hold two different Gloo builds. Gloo is C++ with default symbol visibility, so when LibTorch
# exports its own copy (PyTorch's wheels link Gloo statically into libtorch_cpu.so) and
# ringtorch also loads Debian's libgloo.so, every gloo:: symbol exists twice and the dynamic
# linker binds each reference to whichever library comes first: code compiled against one
# Gloo's class layouts then runs the other's functions. See docs/gpu.md, "Two LibTorch builds".
#
#   auto    system when LibTorch exports no gloo:: symbol (Debian's LibTorch links libgloo.so
#           itself), torch when it does
#   system  find_package(Gloo): Debian's libgloo-dev, or one unpacked into CMAKE_PREFIX_PATH
#   torch   the Gloo inside LibTorch: its symbols from libtorch_cpu, its headers from LibTorch's
#           include directory or RINGTORCH_GLOO_INCLUDE_DIR (they must be that same Gloo's)
#
# Sets the target `gloo` and RINGTORCH_GLOO_CHOSEN.

find_library(RINGTORCH_TORCH_CPU_LIBRARY torch_cpu HINTS "${TORCH_INSTALL_PREFIX}/lib")
set(RINGTORCH_TORCH_GLOO_SYMBOLS 0)
find_program(RINGTORCH_NM nm)
if(RINGTORCH_TORCH_CPU_LIBRARY AND RINGTORCH_NM)
  execute_process(COMMAND sh -c "'${RINGTORCH_NM}' -DC --defined-only '${RINGTORCH_TORCH_CPU_LIBRARY}' | grep -c ' gloo::'"
                  OUTPUT_VARIABLE RINGTORCH_TORCH_GLOO_SYMBOLS OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

set(RINGTORCH_GLOO_CHOSEN "${RINGTORCH_GLOO_PROVIDER}")
if(RINGTORCH_GLOO_CHOSEN STREQUAL "auto")
  if(RINGTORCH_TORCH_GLOO_SYMBOLS GREATER 0)
    set(RINGTORCH_GLOO_CHOSEN torch)
  else()
    set(RINGTORCH_GLOO_CHOSEN system)
  endif()
endif()

if(RINGTORCH_GLOO_CHOSEN STREQUAL "system")
  if(RINGTORCH_TORCH_GLOO_SYMBOLS GREATER 0)
    message(WARNING "ringtorch: ${RINGTORCH_TORCH_CPU_LIBRARY} exports ${RINGTORCH_TORCH_GLOO_SYMBOLS} gloo:: symbols "
                    "and RINGTORCH_GLOO_PROVIDER=system loads a second Gloo into the same process; use auto or torch")
  endif()
  find_package(Gloo REQUIRED)
  # Gloo's imported target carries no include directory on Debian.
  if(GLOO_INCLUDE_DIRS)
    set_property(TARGET gloo APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${GLOO_INCLUDE_DIRS}")
  endif()
elseif(RINGTORCH_GLOO_CHOSEN STREQUAL "torch")
  if(NOT RINGTORCH_TORCH_GLOO_SYMBOLS GREATER 0)
    message(FATAL_ERROR "ringtorch: RINGTORCH_GLOO_PROVIDER=torch, but ${RINGTORCH_TORCH_CPU_LIBRARY} exports no gloo:: "
                        "symbol (this LibTorch links an external Gloo): use RINGTORCH_GLOO_PROVIDER=system")
  endif()
  find_path(RINGTORCH_GLOO_INCLUDE_DIR gloo/config.h HINTS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(NOT RINGTORCH_GLOO_INCLUDE_DIR)
    message(FATAL_ERROR "ringtorch: ${RINGTORCH_TORCH_CPU_LIBRARY} exports ${RINGTORCH_TORCH_GLOO_SYMBOLS} gloo:: symbols, "
                        "so ringtorch must use that Gloo, but LibTorch ships no Gloo headers (no gloo/config.h under "
                        "${TORCH_INCLUDE_DIRS}). Pass -DRINGTORCH_GLOO_INCLUDE_DIR=<dir holding gloo/config.h> with the "
                        "headers of the Gloo commit this PyTorch was built from; headers of another Gloo (Debian's) "
                        "do not match its class layouts.")
  endif()
  add_library(gloo INTERFACE IMPORTED)
  set_target_properties(gloo PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${RINGTORCH_GLOO_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${RINGTORCH_TORCH_CPU_LIBRARY}")
else()
  message(FATAL_ERROR "RINGTORCH_GLOO_PROVIDER must be auto, system or torch, not '${RINGTORCH_GLOO_PROVIDER}'")
endif()
message(STATUS "ringtorch: Gloo from ${RINGTORCH_GLOO_CHOSEN} (${RINGTORCH_TORCH_CPU_LIBRARY} exports "
               "${RINGTORCH_TORCH_GLOO_SYMBOLS} gloo:: symbols)")
