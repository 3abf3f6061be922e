# glnet_embed(TARGET FILES FUNCTION HEADER): an object library TARGET whose FUNCTION() (declared in HEADER, under
# engine/) returns each of FILES' text by file name, regenerated when one changes (cmake/EmbedFiles.cmake).
function(glnet_embed target files function header)
  set(embedded "${CMAKE_CURRENT_BINARY_DIR}/${target}.cpp")
  list(JOIN files "|" file_list)
  add_custom_command(
    OUTPUT "${embedded}"
    COMMAND "${CMAKE_COMMAND}" -D "OUTPUT=${embedded}" -D "FILES=${file_list}" -D "FUNCTION=${function}"
            -D "HEADER=${header}" -P "${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake"
    DEPENDS ${files} "${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake"
    COMMENT "Embedding ${target}"
    VERBATIM)
  add_library(${target} OBJECT "${embedded}")
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/engine")
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
