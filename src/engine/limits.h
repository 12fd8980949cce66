// The limits the command line, the server and the decode loop share: one
// place for each, with the reason for its value.
#pragma once

#include <algorithm>

#include "cache/kv_cache.h"

namespace kakeya {

// Rows of the largest verify step any command accepts (run --block, bench
// spec --blocks, the server's slots). Past 16 rows a verify already costs
// like a prefill chunk: on the memory-bound 1.25B bench model 16 rows take
// 3-3.5 plain steps (ADR 0005, Q4_K_M 62-74 ms against ~20 ms), so no
// drafter's acceptance pays for 64; the bound keeps a context's logit rows
// (rows x n_vocab floats) small: 39 MB at 64 rows of a 152k vocabulary.
inline constexpr int kMaxBlock = 64;
// The codec codes a position only once no verify block can trim it.
static_assert(kCodecExact > kMaxBlock, "a verify block could roll back a coded position");
static_assert(kMaxRecurrentRollback >= kMaxBlock, "a verify block could roll back past a recurrent state's reach");

// Rows of the largest verify step the adaptive draft length (ADR 0004)
// chooses, and what a context reserves logit rows for when no fixed block is
// given (run and chat without --block, the server). The shipped drafters
// commit under 6 tokens per step on average (models/README.md), so the
// policy's best length stays well below 16; DFlash's published block is 16.
inline constexpr int kAdaptiveMaxBlock = 16;

// Rows of one prefill forward (a prompt runs in chunks of this many), and so
// the rows a context may append before a commit: a ring layer keeps window +
// this many rows, a coded layer 256 + 16 + this many exact ones. llama.cpp's
// default -ub is 512 too; larger chunks add scratch and ring rows, not speed,
// once the weights are read at the memory roofline.
inline constexpr int kPrefillChunk = 512;

// Context positions when -c is not given: the model's training context, at
// most this many (llama.cpp's default -c too). A model trained at 128k would
// otherwise allocate a cache of 128k positions per sequence up front (F32 K/V:
// 8 GiB for the 1.25B bench model's shape).
inline constexpr int kDefaultContextSize = 4096;
inline int DefaultContextSize(int n_ctx_train) { return std::min(n_ctx_train, kDefaultContextSize); }

}  // namespace kakeya
