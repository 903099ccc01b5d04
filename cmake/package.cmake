# libkiln.so and its installation: headers, the library, the `kiln` program, the CMake package
# (find_package(kiln) -> kiln::kiln) and kiln.pc (pkg-config). docs/embedding.md.
include(CMakePackageConfigHelpers)

# One shared library holding all of kiln: the C API (frontend/c_api*.cpp), the C++ API
# (kiln_frontend), the `kiln` program's commands
# (kiln_cli) and, pulled in as they are used, every layer below them. LLVM, fmt, SQLite, toml++ and
# xxhash are its private shared dependencies; shaderc, glslang and SPIRV-Tools are linked in
# statically. The version script exports kiln's API alone (KILN_EXPORT symbols named kiln_* or
# kiln::*): nothing of the static libraries inside, nor any template instantiation.
add_library(kiln_shared SHARED ${PROJECT_SOURCE_DIR}/frontend/c_api.cpp
  ${PROJECT_SOURCE_DIR}/frontend/c_api_graph.cpp)
add_library(kiln::kiln ALIAS kiln_shared)
set_target_properties(kiln_shared PROPERTIES
  OUTPUT_NAME kiln EXPORT_NAME kiln
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libkiln.map)
target_compile_options(kiln_shared PRIVATE ${KILN_WARNINGS})
target_include_directories(kiln_shared PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(kiln_shared PUBLIC cxx_std_23)
target_link_libraries(kiln_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,kiln_frontend,kiln_cli>"
  fmt::fmt)
target_link_options(kiln_shared PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/libkiln.map"
  "LINKER:--no-undefined")

install(TARGETS kiln_shared EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kiln_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kilnConfig.cmake ${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_CMAKE_DIR})
# kiln.pc finds its prefix from where it is installed (${pcfiledir}), so a prefix given to
# `cmake --install --prefix` works; Libs carries the library's directory as the RPATH, so a
# program built with `pkg-config --cflags --libs kiln` runs without LD_LIBRARY_PATH.
file(RELATIVE_PATH KILN_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${CMAKE_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
