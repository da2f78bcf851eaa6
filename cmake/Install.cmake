# cmake --install: libraries, the public headers (include/ringtorch/*.h, docs/ARCHITECTURE.md
# "The public API"), the apps, and a ringtorchConfig.cmake so that other projects can
#   find_package(ringtorch) + target_link_libraries(app PRIVATE ringtorch::ringtorch)
# and #include <ringtorch/ringtorch.h> (or the single headers, <ringtorch/process_group.h>).
include(CMakePackageConfigHelpers)

set(ringtorch_shared_libraries
  ringtorch_base ringtorch_rendezvous ringtorch_runtime ringtorch_training ringtorch_datasets ringtorch_models)
# Each library's SONAME carries the project's major.minor (libringtorch_runtime.so.0.1). A change
# to the layout of a type in an installed header (ProcessGroupOptions grows a field) or to an
# exported signature bumps the minor version in project(), so a program built against the old
# one never loads the new libraries: it runs on its own .so.0.1 where that is still installed,
# and stops at start-up where it is not ("libringtorch_runtime.so.0.1: cannot open shared object
# file") instead of reading the new layout wrongly; ringtorchConfigVersion.cmake
# (SameMinorVersion) agrees.
set_target_properties(${ringtorch_shared_libraries} PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

install(TARGETS ${ringtorch_shared_libraries}
  EXPORT ringtorchTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# ringtorch::ringtorch: every library, for programs that include <ringtorch/ringtorch.h>.
add_library(ringtorch_all INTERFACE)
add_library(ringtorch::ringtorch ALIAS ringtorch_all)
set_target_properties(ringtorch_all PROPERTIES EXPORT_NAME ringtorch)
target_link_libraries(ringtorch_all INTERFACE ${ringtorch_shared_libraries})
install(TARGETS ringtorch_all EXPORT ringtorchTargets)

# Only the public API: the internal headers stay in the source tree, so a change inside the
# libraries breaks no consumer's build.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ringtorch DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT ringtorchTargets
  NAMESPACE ringtorch::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringtorch)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ringtorchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ringtorchConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringtorch)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ringtorchConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ringtorchConfig.cmake ${PROJECT_BINARY_DIR}/ringtorchConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringtorch)
