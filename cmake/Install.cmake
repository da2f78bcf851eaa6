# cmake --install: libraries, headers (under include/ringtorch/, kept in their layer folders),
# the apps, and a ringtorchConfig.cmake so that other projects can
#   find_package(ringtorch) + target_link_libraries(app PRIVATE ringtorch::runtime)
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

foreach(layer base rendezvous runtime datasets models)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringtorch/${layer}
    FILES_MATCHING PATTERN "*.h")
endforeach()

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
