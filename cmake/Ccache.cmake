# ccache, when present. Precompiled headers need the pch_defines/time_macros sloppiness,
# otherwise every translation unit that uses the LibTorch PCH is a cache miss.
if(RINGTORCH_USE_CCACHE)
  find_program(RINGTORCH_CCACHE ccache)
  if(RINGTORCH_CCACHE)
    set(_launcher ${CMAKE_COMMAND} -E env
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        ${RINGTORCH_CCACHE})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_launcher})
    message(STATUS "ringtorch: compiling through ${RINGTORCH_CCACHE}")
  endif()
endif()
