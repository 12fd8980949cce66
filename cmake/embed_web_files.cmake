# cmake -DOUT=file.cc -DFILES="a;b;c" -P embed_web_files.cmake
# Writes OUT: the bytes of each file as a string literal of \xNN escapes (every
# byte escaped, so no escape runs into the next character), and WebAssets()
# listing them by URL path (index.html is "/") with their Content-Type.
# A file type not in the table below stops the build rather than be served
# with a guessed type.
cmake_minimum_required(VERSION 3.25)

set(body "")
set(table "")
set(i 0)
string(REPEAT "[0-9a-f]" 64 line_of_32_bytes)
foreach(file IN LISTS FILES)
  get_filename_component(name ${file} NAME)
  get_filename_component(ext ${file} LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  elseif(ext STREQUAL ".png")
    set(type "image/png")
  else()
    message(FATAL_ERROR "${file}: no Content-Type known for '${ext}' files (add it to ${CMAKE_CURRENT_LIST_FILE})")
  endif()
  if(name STREQUAL "index.html")
    set(path "/")
  else()
    set(path "/${name}")
  endif()
  file(READ ${file} hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "(${line_of_32_bytes})" "\\1\n" hex "${hex}")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" hex "${hex}")
  string(REGEX REPLACE "([^\n]+)" "    \"\\1\"" literal "${hex}")
  string(APPEND body "// ${name}\nconstexpr char kAsset${i}[] =\n${literal};\n\n")
  string(APPEND table "    {\"${path}\", \"${type}\", {kAsset${i}, ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()

file(CONFIGURE OUTPUT ${OUT} @ONLY CONTENT [=[
// Generated at build time from web/ by cmake/embed_web_files.cmake: do not edit.
#include "server/web_assets.h"

namespace kakeya {
namespace {

@body@constexpr WebAsset kAssets[] = {
@table@};

}  // namespace

std::span<const WebAsset> WebAssets() { return kAssets; }

}  // namespace kakeya
]=])
