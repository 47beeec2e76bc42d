# What `cmake --install` puts where, and the Debian package CPack makes of it: `ninja deb` in a
# build folder builds the four programs and writes aclaim_<version>-<release>_<arch>.deb there
# (configured with -C packaging/deb-build.cmake for the package's hardened release build).
# Included from the top-level CMakeLists.txt after every program's folder, so that the install
# rules can name their targets. packaging/check-deb builds, lints, installs and starts the package
# in a fresh Debian 12 container.
include(GNUInstallDirs)

set(ACLAIM_DEB_DIR ${CMAKE_CURRENT_LIST_DIR}/debian)

set(ACLAIM_INSTALLED_PROGRAMS aclaim_coordinator_bin aclaim_worker_main aclaimctl
                              aclaim_console_bin)
install(TARGETS ${ACLAIM_INSTALLED_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Installing (and cpack, which installs first) builds only what it installs, not every test suite
# and drill that `all` holds: `ninja deb` below, or build the four programs before `ninja install`.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
# Every binary carries the schema (common/store/embed_schema.cmake); the files are shipped for
# reading what `aclaimctl migrate` applies: current.sql, the baseline, the migrations after it and
# the definitions.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/schema/ DESTINATION ${CMAKE_INSTALL_DATADIR}/aclaim/schema
        FILES_MATCHING PATTERN "*.sql")

# A manual page per program, made from its --help when the package is (`ninja deb`), not in every
# build: a sanitizer build's program may not exit 0 from --help. OPTIONAL: `ninja install` alone
# goes without them.
set(ACLAIM_MAN_PAGES "")
foreach(entry
        "aclaim_coordinator_bin|aclaim-coordinator|hands review jobs from PostgreSQL to workers"
        "aclaim_worker_main|aclaim-worker|simulated reviewer workers"
        "aclaimctl|aclaimctl|the operator's command line"
        "aclaim_console_bin|aclaim-console|the operator's console in the browser")
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 target)
  list(GET entry 1 name)
  list(GET entry 2 summary)
  set(page ${CMAKE_BINARY_DIR}/packaging/man/${name}.1.gz)
  add_custom_command(
    OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}> -DNAME=${name}
            "-DSUMMARY=${summary}" -DVERSION=${PROJECT_VERSION} -DOUT=${page}
            -P ${CMAKE_CURRENT_LIST_DIR}/man_page.cmake
    DEPENDS ${target} ${CMAKE_CURRENT_LIST_DIR}/man_page.cmake
    COMMENT "Manual page of ${name}" VERBATIM)
  list(APPEND ACLAIM_MAN_PAGES ${page})
endforeach()
add_custom_target(aclaim_man_pages DEPENDS ${ACLAIM_MAN_PAGES})
install(FILES ${ACLAIM_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 OPTIONAL)

# Absolute destinations: Debian's places for units and settings, whatever the prefix. The
# settings may hold a database password and are read by systemd as root before it drops to the
# aclaim user: 0600.
install(FILES ${ACLAIM_DEB_DIR}/aclaim-coordinator.service ${ACLAIM_DEB_DIR}/aclaim-console.service
        DESTINATION /lib/systemd/system)
install(FILES ${ACLAIM_DEB_DIR}/coordinator.env ${ACLAIM_DEB_DIR}/console.env
        DESTINATION /etc/aclaim PERMISSIONS OWNER_READ OWNER_WRITE)

# Debian wants the changelog compressed with gzip -9n (no name, no time stamp: reproducible).
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/packaging)
set(ACLAIM_DEB_CHANGELOG_GZ ${CMAKE_BINARY_DIR}/packaging/changelog.Debian.gz)
execute_process(COMMAND gzip -9nc ${ACLAIM_DEB_DIR}/changelog
                OUTPUT_FILE ${ACLAIM_DEB_CHANGELOG_GZ} COMMAND_ERROR_IS_FATAL ANY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ACLAIM_DEB_DIR}/changelog)
install(FILES ${ACLAIM_DEB_DIR}/lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME aclaim)
install(FILES ${ACLAIM_DEB_DIR}/copyright ${ACLAIM_DEB_DIR}/README.Debian ${ACLAIM_DEB_CHANGELOG_GZ}
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The package's version is the project's; the release counts Debian packagings of one version.
# The changelog's top entry must name the same pair (packaging/check-deb refuses a mismatch).
set(ACLAIM_DEB_RELEASE 1 CACHE STRING "Debian release of this version (the -N in 0.1.0-N)")
file(STRINGS ${ACLAIM_DEB_DIR}/changelog ACLAIM_DEB_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT ACLAIM_DEB_CHANGELOG_TOP MATCHES "^aclaim \\(${PROJECT_VERSION}-${ACLAIM_DEB_RELEASE}\\) ")
  message(WARNING "packaging/debian/changelog's top entry is not ${PROJECT_VERSION}-"
                  "${ACLAIM_DEB_RELEASE}: add an entry before making a package of this version")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME aclaim)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "aclaim maintainers <maintainers@aclaim.invalid>"
    CACHE STRING "Maintainer of the Debian package (name <address>)")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "job coordinator handing review jobs to workers")
# The extended description under the summary (CPack puts the summary first): one string, since
# set() would join several with semicolons.
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
       "aclaim keeps review jobs in PostgreSQL and hands them to reviewer workers\n"
       "over ZeroMQ, each claim under a time-limited lease and a fencing generation,\n"
       "so that no job is completed twice and none is lost when workers or\n"
       "coordinators die.\n"
       "\n"
       "This package holds the coordinator, the worker simulator, the operator's\n"
       "command line aclaimctl and the browser console, with systemd units for the\n"
       "coordinator and the console running as the unprivileged user aclaim.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${ACLAIM_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The shared libraries' packages, as dpkg-shlibdeps finds them from the binaries (libpqxx-6.4,
# libzmq5, libsodium23, libspdlog1.10, libfmt9, libcpp-httplib0.11 on Debian 12); adduser for
# the postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql")
set(CPACK_STRIP_FILES ON)
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/strip_notes.cmake)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${ACLAIM_DEB_DIR}/conffiles ${ACLAIM_DEB_DIR}/postinst
                                       ${ACLAIM_DEB_DIR}/prerm ${ACLAIM_DEB_DIR}/postrm)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)

# `ninja deb`: the four programs and their manual pages, then the package in the build folder.
add_custom_target(deb COMMAND ${CMAKE_CPACK_COMMAND} -G DEB
                  WORKING_DIRECTORY ${CMAKE_BINARY_DIR} USES_TERMINAL
                  COMMENT "Making the Debian package")
add_dependencies(deb ${ACLAIM_INSTALLED_PROGRAMS} aclaim_man_pages)
