# The package's build settings, loaded with -C before the first configure:
#   cmake -C packaging/deb-build.cmake -S . -B build-pkg -G Ninja && ninja -C build-pkg deb
# A release build (RelWithDebInfo, line tables only) with the hardening Debian builds its own
# packages with: fortified libc calls, a stack protector, and a global offset table made read-only
# before main (relro with bindnow).
set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
set(CMAKE_CXX_FLAGS "-D_FORTIFY_SOURCE=2 -fstack-protector-strong" CACHE STRING
    "Flags for every build type: Debian's hardening" FORCE)
set(CMAKE_EXE_LINKER_FLAGS "-Wl,-z,relro -Wl,-z,now" CACHE STRING
    "Linker flags: Debian's hardening with bindnow" FORCE)
