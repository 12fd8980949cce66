"""SentencePiece BPE tokenizer for code, stored as a `llama` (SPM) vocabulary in GGUF.

Why these options (docs/formats/tokenizers.md 4.3 describes what the engine does with the vocabulary):
* model_type=bpe: llama.cpp/kakeya encode SPM vocabularies by greedy highest-score pair
  merging, which is exactly SentencePiece's BPE encoder (scores = -merge rank). A unigram
  model would be encoded differently (Viterbi) and ids would not match.
* normalization identity, no dummy prefix, no whitespace squeezing: code must round-trip
  byte for byte. add_space_prefix=false is written to GGUF to match add_dummy_prefix=False.
* allow_whitespace_only_pieces + split_by_whitespace=False: runs of spaces (indentation)
  become ordinary learned pieces such as "▁▁▁▁" and "▁▁▁▁▁▁▁▁". User-defined pieces would
  not work: the engine matches USER_DEFINED texts against the raw text, where a space is
  " " and not "▁".
* byte_fallback: any character outside the vocabulary becomes <0xXX> byte tokens, so UNK
  is never produced.
* The trainer reads one "sentence" per item; we feed whole chunks of lines with their
  newlines so that "\n" (and "\n" followed by indentation) are learned like other text.
"""
import os

import sentencepiece as spm

# SentencePiece piece types equal GGUF token types (docs/formats/tokenizers.md 4.1).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
MAX_CHUNK_BYTES = 4000  # stays under the trainer's max_sentence_length


def _chunks(docs):
    """Split documents into newline-terminated chunks of at most MAX_CHUNK_BYTES."""
    for _, text in docs:
        chunk = ""
        for line in text.splitlines(keepends=True):
            if chunk and len((chunk + line).encode("utf-8")) > MAX_CHUNK_BYTES:
                yield chunk
                chunk = ""
            chunk += line
        if chunk:
            yield chunk


def train(train_docs, out_dir, vocab_size, threads=2):
    # Deterministic: every chunk is used (no sampling), and BPE training has no randomness.
    prefix = os.path.join(out_dir, "tokenizer")
    spm.SentencePieceTrainer.train(
        sentence_iterator=_chunks(train_docs),
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=0.9999,
        byte_fallback=True,
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        split_by_whitespace=False,
        allow_whitespace_only_pieces=True,
        split_digits=True,
        max_sentence_length=MAX_CHUNK_BYTES * 4,
        input_sentence_size=0,  # use every chunk
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=threads,
        minloglevel=2,
    )
    return prefix + ".model"


def load(model_path):
    return spm.SentencePieceProcessor(model_file=model_path)


def piece_type(sp, i):
    if sp.is_unknown(i):
        return UNKNOWN
    if sp.is_control(i):
        return CONTROL
    if sp.is_byte(i):
        return BYTE
    if sp.is_unused(i):
        return UNUSED
    return NORMAL


def gguf_vocab(sp):
    """tokens, scores and token types, indexed by id, for tokenizer.ggml.*."""
    n = sp.get_piece_size()
    return ([sp.id_to_piece(i) for i in range(n)],
            [sp.get_score(i) for i in range(n)],
            [piece_type(sp, i) for i in range(n)])


def encode_docs(sp, docs):
    """Each document as BOS + tokens + EOS (the engine adds BOS to every prompt)."""
    return [[sp.bos_id()] + ids + [sp.eos_id()] for ids in sp.encode([t for _, t in docs])]
