# Turns schema/ into a C++ table so binaries carry it: the baseline (schema/baseline/: the version
# it stands for, its tables and its bindings), the numbered migrations after it
# (schema/NNNN_name.sql) in version order, the repeatable definitions
# (schema/definitions/<kind>/<name>.sql) in the order they are applied: functions (a trigger's
# function among them), then views, then policies, each kind by name; and the history: the
# migrations the baseline replaced, as schema/checksums pins them (a line whose file is gone).
# Each carries the sha256 of its file, which the migrator records and compares.
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

file(READ "${SCHEMA_DIR}/baseline/tables.sql" baseline_tables)
file(READ "${SCHEMA_DIR}/baseline/bindings.sql" baseline_bindings)
file(SHA256 "${SCHEMA_DIR}/baseline/tables.sql" baseline_sum)
file(SHA256 "${SCHEMA_DIR}/baseline/bindings.sql" baseline_bindings_sum)
string(REGEX MATCH "^-- aclaim baseline: schema version ([0-9]+)" baseline_head "${baseline_tables}")
if(NOT baseline_head)
  message(FATAL_ERROR "schema/baseline/tables.sql must begin with '-- aclaim baseline: schema version N'")
endif()
set(baseline_version ${CMAKE_MATCH_1})
aclaim_embed_text(baseline_tables_literal "${baseline_tables}")
aclaim_embed_text(baseline_bindings_literal "${baseline_bindings}")

set(history "")
file(STRINGS "${SCHEMA_DIR}/checksums" pinned REGEX "^[0-9a-f]+  [0-9][0-9][0-9][0-9]_.*\\.sql$")
foreach(line ${pinned})
  string(REGEX MATCH "^([0-9a-f]+)  (([0-9][0-9][0-9][0-9])_.*)\\.sql$" ignored "${line}")
  set(sum ${CMAKE_MATCH_1})
  set(name ${CMAKE_MATCH_2})
  math(EXPR version "${CMAKE_MATCH_3}")
  if(NOT EXISTS "${SCHEMA_DIR}/${name}.sql" AND version LESS_EQUAL baseline_version)
    string(APPEND history "    {${version}, \"${name}\", {}, \"${sum}\"},\n")
  endif()
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

namespace aclaim::store {

const std::vector<Migration>& embedded_migrations() {
    static const std::vector<Migration> kAll{
${migrations}    };
    return kAll;
}

const Baseline& embedded_baseline() {
    static const Baseline kBaseline{${baseline_version}, ${baseline_tables_literal},
                                    ${baseline_bindings_literal}, \"${baseline_sum}\",
                                    \"${baseline_bindings_sum}\"};
    return kBaseline;
}

const std::vector<Migration>& embedded_history() {
    static const std::vector<Migration> kAll{
${history}    };
    return kAll;
}

const std::vector<Definition>& embedded_definitions() {
    static const std::vector<Definition> kAll{
${definitions}    };
    return kAll;
}

}  // namespace aclaim::store
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
