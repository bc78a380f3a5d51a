# `cmake --install <build> [--prefix P]`: libkiln.a, its headers under include/kiln, and a
# CMake package, so a project outside this tree writes (tutorials/README.md)
#   find_package(kiln REQUIRED)
#   target_link_libraries(app PRIVATE kiln::kiln)
# Generated kernels #include kiln's math headers: from the source tree the library was built
# from while it exists, else from <configure-time prefix>/include/kiln; an install moved
# elsewhere sets KILN_INCLUDE_DIR=<prefix>/include/kiln (docs/env.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(kiln::kiln ALIAS kiln)
target_include_directories(kiln PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/kiln>)
target_compile_features(kiln PUBLIC cxx_std_20)
if(KILN_SANITIZE)  # an instrumented libkiln.a needs the sanitizer runtimes wherever it is linked
  target_link_options(kiln INTERFACE -fsanitize=address,undefined)
endif()

install(TARGETS kiln EXPORT kilnTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(DIRECTORY tensor autograd nn optim jit codegen models dist DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(cmake/kilnConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
