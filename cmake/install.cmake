# install.cmake: what `cmake --install` puts where (included by the top
# CMakeLists.txt).
#
#   lib/libtaskcache.so, lib/libtaskcache.a   imported as taskcache::taskcache and
#                                             taskcache::taskcache_static by
#   lib/cmake/taskcache/                      find_package(taskcache CONFIG)
#   lib/pkgconfig/taskcache.pc                pkg-config (--static for the archive)
#   include/taskcache.h, bin/taskcache, lib/libtaskcache_intercept.so and
#   lib/libtaskcache_jit.so (taskcache run: the preloaded part and its builder)
#   share/man/man1/taskcache.1                man taskcache (docs/taskcache.1)
#
# When scikit-build-core drives the build (pip install ./python, or
# scripts/build-wheel.sh), the same targets go into the Python package
# instead: taskcache/libtaskcache.so beside the package's __init__.py (where
# it looks first), taskcache/bin/taskcache (the command line, run by the
# package's `taskcache` console script) and taskcache/lib/ for the driver
# interceptor (taskcache run finds it in ../lib from bin/).

if(SKBUILD)
  # pyproject.toml builds with TASKCACHE_STATIC_DEPS: libcrypto and libzstd
  # are linked into each binary with their symbols hidden, so the wheel
  # needs nothing but glibc. Grafted shared copies (auditwheel's way) would
  # be a problem for the interceptor: preloaded into a program that brings
  # its own OpenSSL, its libcrypto's symbols would come first in the
  # program's global scope and serve the program's calls.
  # One file, not the soname link chain: a wheel is a zip and would carry
  # three copies. ctypes loads it by path.
  install(FILES $<TARGET_FILE:taskcache> DESTINATION taskcache RENAME libtaskcache.so)
  install(TARGETS taskcache_cli RUNTIME DESTINATION taskcache/bin)
  install(TARGETS taskcache_intercept taskcache_jit LIBRARY DESTINATION taskcache/lib)
  # TASKCACHE_WARP=1 switches NVIDIA Warp over to taskcache.warp when it is
  # imported (python/taskcache/_warp_hook.py): a line Python reads at start
  install(FILES python/taskcache-warp.pth DESTINATION .)
  # Their licences travel with them (OpenSSL: Apache 2.0, zstd: BSD): the
  # copyright files of the Debian packages that provided the archives, into
  # the wheel's .dist-info/licenses/
  if(TASKCACHE_STATIC_DEPS)
    foreach(pair "openssl:libssl-dev" "zstd:libzstd-dev")
      string(REPLACE ":" ";" pair "${pair}")
      list(GET pair 0 name)
      list(GET pair 1 pkg)
      if(EXISTS /usr/share/doc/${pkg}/copyright)
        install(FILES /usr/share/doc/${pkg}/copyright DESTINATION ${SKBUILD_METADATA_DIR}/licenses
                RENAME ${name}.txt)
      else()
        message(WARNING "taskcache: no /usr/share/doc/${pkg}/copyright: add ${name}'s licence "
                        "to the wheel by hand")
      endif()
    endforeach()
    if(EXISTS /usr/share/common-licenses/Apache-2.0) # OpenSSL's, which its file names
      install(FILES /usr/share/common-licenses/Apache-2.0
              DESTINATION ${SKBUILD_METADATA_DIR}/licenses RENAME Apache-2.0.txt)
    endif()
  endif()
  return()
endif()

include(CMakePackageConfigHelpers)

# What a program that links the archive needs besides it: the same
# libraries the shared library was linked with. zstd has no CMake module of
# its own, so it is named by the file this build found.
if(ZSTD_LINK_LIBRARIES)
  set(TC_ZSTD_FILE "${ZSTD_LINK_LIBRARIES}")
else()
  set(TC_ZSTD_FILE "${ZSTD_LIBRARY}")
endif()
set(TC_STATIC_DEPS OpenSSL::Crypto "${TC_ZSTD_FILE}" ${TC_REMOTE_FILES} Threads::Threads
    ${CMAKE_DL_LIBS})
# the remote tier's libraries by name (Libs.private, not Requires.private:
# the archive needs only the shared hiredis; libcurl is opened at run time)
foreach(mod ${TC_REMOTE_PC})
  string(REGEX REPLACE "^lib" "" mod "${mod}")
  string(APPEND TC_PC_REMOTE_LIBS " -l${mod}")
endforeach()
set(TC_PC_LIBS_PRIVATE "${TC_PC_REMOTE_LIBS} -pthread")
string(STRIP "${TC_PC_LIBS_PRIVATE}" TC_PC_LIBS_PRIVATE)
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND TC_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
if(TC_HAVE_NVPTX)
  # the in-process compiler is linked into the archive's users too (by the
  # path this build used: NVIDIA's licence does not list it as a file we
  # may ship)
  list(APPEND TC_STATIC_DEPS "${TC_NVPTXCOMPILER_LIB}" m rt)
  string(APPEND TC_PC_LIBS_PRIVATE " ${TC_NVPTXCOMPILER_LIB} -lm -lrt")
endif()
target_include_directories(taskcache_static INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(taskcache_static INTERFACE "$<INSTALL_INTERFACE:${TC_STATIC_DEPS}>")
set_target_properties(taskcache_static PROPERTIES EXPORT_NAME taskcache_static)

install(TARGETS taskcache taskcache_static EXPORT taskcacheTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS taskcache_cli taskcache_intercept taskcache_jit
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/taskcache.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES docs/taskcache.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

set(TC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/taskcache)
install(EXPORT taskcacheTargets NAMESPACE taskcache:: DESTINATION ${TC_CMAKE_DIR})
configure_package_config_file(cmake/taskcacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/taskcacheConfig.cmake INSTALL_DESTINATION ${TC_CMAKE_DIR})
# 0.x: a new minor version may change the ABI (include/taskcache.h)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/taskcacheConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/taskcacheConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/taskcacheConfigVersion.cmake
        DESTINATION ${TC_CMAKE_DIR})

# pkg-config: the prefix is found from where the .pc file lies
# (${pcfiledir}), so that `cmake --install --prefix P` and a moved
# installation both work
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH TC_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" TC_PC_UP "${TC_PC_UP}")
  set(TC_PC_PREFIX "\${pcfiledir}/${TC_PC_UP}")
endif()
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(TC_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(TC_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
configure_file(cmake/taskcache.pc.in ${CMAKE_CURRENT_BINARY_DIR}/taskcache.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/taskcache.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
