# As aarch64-linux-gnu.cmake, with Debian's clang 14 instead of GCC: the
# compiler family that builds for macOS, for the tiles' instruction counts
# (scripts/tile-instructions.py, ADR 0011). clang 14's arm_neon.h declares the
# dot-product and i8mm intrinsics only when the flags enable the extensions,
# so this build assumes an ARMv8.6 core with both; the run-time choice of form
# is unchanged.
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake)
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_CXX_FLAGS_INIT "-isystem /usr/include/aarch64-linux-gnu -march=armv8.6-a+dotprod+i8mm")
