# Run by CPack on the staged tree before packing (CPACK_PRE_BUILD_SCRIPTS): the programs are
# already stripped of symbols; this drops the compiler's .comment and the .note section too, as
# Debian's dh_strip does, since nothing reads them on an installed system.
file(GLOB programs "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/bin/*")
foreach(program ${programs})
  execute_process(COMMAND strip --remove-section=.comment --remove-section=.note "${program}"
                  COMMAND_ERROR_IS_FATAL ANY)
endforeach()
