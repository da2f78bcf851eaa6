# The habits the build enforces (CONTRIBUTING.md): warnings as errors for ringtorch's own code,
# and sanitizer builds. Every target defined after this file links ringtorch_warnings (through
# link_libraries in the top-level CMakeLists.txt); third-party headers come in as system
# headers (imported targets), so their warnings do not count.
add_library(ringtorch_warnings INTERFACE)
target_compile_options(ringtorch_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGTORCH_WERROR}>>:-Werror>)
# No -Wthread-safety: clang's analysis needs a mutex type annotated as a capability, and
# libstdc++'s std::mutex is not; wrapping every mutex and condition variable for a compiler the
# project does not build with did not read well. Headers say in words which mutex guards what
# ("guarded by mutex_"), and the TSan build checks it (CONTRIBUTING.md).

# RINGTORCH_SANITIZE=address,undefined or thread: instruments ringtorch (LibTorch and Gloo stay
# as Debian built them). docs/testing.md says how to run the suites under each.
if(RINGTORCH_SANITIZE)
  if(NOT RINGTORCH_SANITIZE MATCHES "^(address|undefined|address,undefined|undefined,address|thread)$")
    message(FATAL_ERROR "RINGTORCH_SANITIZE=${RINGTORCH_SANITIZE}: use address,undefined or thread")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${RINGTORCH_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=${RINGTORCH_SANITIZE})
  message(STATUS "ringtorch: sanitizers ${RINGTORCH_SANITIZE}")
endif()
