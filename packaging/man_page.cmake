# Writes a program's manual page from its --help (the one place its options are described), so
# that `man PROGRAM` answers on an installed system; gzip -9n as Debian wants it:
#   cmake -DPROGRAM=path -DNAME=name -DSUMMARY=text -DVERSION=x.y.z -DOUT=name.1.gz \
#         -P man_page.cmake
execute_process(COMMAND ${PROGRAM} --help OUTPUT_VARIABLE help RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --help exited ${status}")
endif()
if(NAME STREQUAL "aclaim-console")
  execute_process(COMMAND ${PROGRAM} serve --help OUTPUT_VARIABLE serve_help
                  COMMAND_ERROR_IS_FATAL ANY)
  string(APPEND help "\n${serve_help}")
endif()
# The usage line names the program as it was run: by its path in the build folder.
string(REPLACE "${PROGRAM}" "${NAME}" help "${help}")
# roff: a backslash is \e, and a line may not begin with a control character.
string(REPLACE "\\" "\\e" help "${help}")
string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
string(TOUPPER "${NAME}" title)
set(page ".TH ${title} 1 \"\" \"aclaim ${VERSION}\" \"aclaim\"
.SH NAME
${NAME} \\- ${SUMMARY}
.SH DESCRIPTION
An option marked Env: is also read from that environment variable.
.PP
.nf
${help}.fi
.SH SEE ALSO
.BR aclaim-coordinator (1),
.BR aclaim-worker (1),
.BR aclaimctl (1),
.BR aclaim-console (1);
/usr/share/doc/aclaim/README.Debian
")
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
string(REGEX REPLACE "\\.gz$" "" plain "${OUT}")
file(WRITE "${plain}" "${page}")
execute_process(COMMAND gzip -9nf "${plain}" COMMAND_ERROR_IS_FATAL ANY)
