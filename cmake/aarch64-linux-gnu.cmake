# Cross-compiling for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu and
# the arm64 multiarch libraries (scripts/test-arm.sh installs both). Test
# binaries run under qemu-user with every ARM extension on (-cpu max), so
# gtest_discover_tests and ctest work as on the host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
# No -L /usr/aarch64-linux-gnu: the arm64 libraries are the multiarch ones in
# /lib/aarch64-linux-gnu, and their libc must be loaded by their own loader
# (/lib/ld-linux-aarch64.so.1). The cross package's loader is another build
# of glibc: with it, the first pthread_create spun forever (Debian 12).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max)
# pkg-config's arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
