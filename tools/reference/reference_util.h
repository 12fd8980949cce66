// What the reference programs (tools/reference/*.cpp) share: a fatal error
// naming the program, integer flags, reading a file whole, and llama.cpp's
// log cut to its errors. Each program defines kProgramName before including it.
#pragma once

#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

[[noreturn]] void fail(const std::string & message) {
    std::fprintf(stderr, "%s: %s\n", kProgramName, message.c_str());
    std::exit(1);
}

int parse_int(const std::string & text, const char * what) {
    try {
        size_t used = 0;
        const int value = std::stoi(text, &used);
        if (used == text.size()) return value;
    } catch (const std::exception &) {}
    fail(std::string("bad ") + what + ": '" + text + "'");
}

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read '" + path + "'");
    std::ostringstream contents;
    contents << in.rdbuf();
    return contents.str();
}

void only_errors_log(ggml_log_level level, const char * text, void *) {
    // CONT lines continue the previous message, so they follow its level.
    static bool printing = false;
    if (level != GGML_LOG_LEVEL_CONT) printing = level == GGML_LOG_LEVEL_ERROR;
    if (printing) std::fputs(text, stderr);
}

}  // namespace
