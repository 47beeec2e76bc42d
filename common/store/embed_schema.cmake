# Turns schema/ into a C++ table so binaries carry it: the numbered migrations
# (schema/NNNN_name.sql) in version order, then the repeatable definitions
# (schema/definitions/<kind>/<name>.sql) in the order they are applied: functions (a trigger's
# function among them), then views, then policies, each kind by name. Each carries the sha256 of
# its file, which the migrator records and compares.
function(aclaim_embed_text out_var text)
  set(${out_var} "R\"aclaimsql(${text})aclaimsql\"" PARENT_SCOPE)
endfunction()

file(GLOB files "${SCHEMA_DIR}/[0-9][0-9][0-9][0-9]_*.sql")
list(SORT files)
set(migrations "")
foreach(f ${files})
  get_filename_component(name "${f}" NAME_WE)
  string(SUBSTRING "${name}" 0 4 version)
  math(EXPR version "${version}")
  file(READ "${f}" text)
  file(SHA256 "${f}" sum)
  aclaim_embed_text(literal "${text}")
  string(APPEND migrations "    {${version}, \"${name}\", ${literal}, \"${sum}\"},\n")
endforeach()

set(definitions "")
foreach(kind functions views policies)
  file(GLOB files "${SCHEMA_DIR}/definitions/${kind}/*.sql")
  list(SORT files)
  foreach(f ${files})
    get_filename_component(name "${f}" NAME_WE)
    file(READ "${f}" text)
    file(SHA256 "${f}" sum)
    aclaim_embed_text(literal "${text}")
    string(APPEND definitions "    {\"${kind}/${name}\", ${literal}, \"${sum}\"},\n")
  endforeach()
endforeach()

file(WRITE "${OUT}.tmp" "// Generated from schema/ at build time.
#include \"common/store/migrations.hpp\"

namespace aclaim::common {

const std::vector<Migration>& embedded_migrations() {
    static const std::vector<Migration> kAll{
${migrations}    };
    return kAll;
}

const std::vector<Definition>& embedded_definitions() {
    static const std::vector<Definition> kAll{
${definitions}    };
    return kAll;
}

}  // namespace aclaim::common
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
