# kakeya_embed_web(TARGET DIR): compiles the files of DIR (the chat page,
# web/) into TARGET as a generated C++ source, so that `kakeya serve` stands
# alone: no files to install beside the binary, none read at run time
# (ADR 0020). The generation is cmake/embed_web_files.cmake, run by CMake
# itself: no xxd, no Python, nothing outside CMake.
function(kakeya_embed_web target dir)
  file(GLOB files CONFIGURE_DEPENDS ${dir}/*)
  list(SORT files)
  set(out ${CMAKE_BINARY_DIR}/generated/web_assets_data.cc)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} "-DOUT=${out}" "-DFILES=${files}" -P ${CMAKE_SOURCE_DIR}/cmake/embed_web_files.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/embed_web_files.cmake
    COMMENT "Embedding the chat page (${dir})"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
