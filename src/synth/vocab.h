// The tokenizer.* metadata of a synthetic model, made from a Hugging Face tokenizer's files as llama.cpp's converter
// makes it, optionally cut to the first n ids for small test files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

namespace zinc::synth {

// The files of vocabulary `vocab` in `dir`, or (dir empty) in data/tokenizers/<vocab>/ of the source tree, then of
// the working directory; throws std::runtime_error naming where it looked.
TokenizerFiles locate_tokenizer(const std::string& vocab, const std::string& dir);

// The metadata for a model of n_vocab embedding rows. truncate: keep only the tokens (and merges) below n_vocab;
// otherwise the vocabulary is padded to n_vocab. `note` hears of tokens that had to be dropped. The Gemma
// vocabulary is declared as the architecture's files declare it: SentencePiece ("llama") for gemma3, else the
// gemma4 form.
std::vector<gguf::KeyValue> vocab_metadata(const std::string& vocab, const TokenizerFiles& files, uint32_t n_vocab,
                                           bool truncate, const std::function<void(const std::string&)>& note,
                                           const std::string& arch = {});

// For each of n_rows embedding rows, whether its token is whole text: a NORMAL or BYTE token whose bytes (as the
// tokenizer decodes them) are non-empty, complete and valid UTF-8. Control, unknown, added (user-defined) and unused
// tokens, and rows past the vocabulary, are not.
std::vector<bool> whole_text_tokens(const tokenizer::Tokenizer& tok, uint32_t n_rows);

}  // namespace zinc::synth
