# cmake --install: libraries, headers (under include/ringtorch/, kept in their layer folders),
# the apps, and a ringtorchConfig.cmake so that other projects can
#   find_package(ringtorch) + target_link_libraries(app PRIVATE ringtorch::runtime)
include(CMakePackageConfigHelpers)

install(TARGETS ringtorch_base ringtorch_rendezvous ringtorch_runtime ringtorch_training ringtorch_datasets ringtorch_models
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
