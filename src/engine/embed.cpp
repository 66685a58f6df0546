#include "engine/embed.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include "gguf/error.h"

namespace zinc::engine {

Pooling file_pooling(const gguf::Model& m) {
    const std::string key = m.get("general.architecture").get_string() + ".pooling_type";
    const gguf::Value* v = m.find(key);
    if (!v) return Pooling::none;
    const int64_t n = v->is_integer() ? v->get_int<int64_t>() : -1;
    if (n < 0 || n > 3)
        throw gguf::Error(m.first().path() + ": " + key + " is " +
                          (v->is_integer() ? std::to_string(n) : "not an integer") +
                          "; zinc pools with 0 (none), 1 (mean), 2 (cls) or 3 (last); 4 (rank) is a reranker's head");
    return Pooling(n);
}

const char* pooling_name(Pooling p) {
    switch (p) {
    case Pooling::none: return "none";
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
    }
    return "?";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
    for (Pooling p : {Pooling::none, Pooling::mean, Pooling::cls, Pooling::last})
        if (name == pooling_name(p)) return p;
    return std::nullopt;
}

void normalize(std::span<float> v) {
    double sum = 0;
    for (float x : v) sum += double(x) * x;
    if (sum <= 0) return;
    const double scale = 1.0 / std::sqrt(sum);
    for (float& x : v) x = float(x * scale);
}

double json_number(float x) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    double d = 0;
    std::from_chars(buf, r.ptr, d);
    return d;
}

Embedder::Embedder(Family& family, backend::Backend& be, Pooling pooling, std::vector<int> seqs, int budget)
    : family_(family), be_(be), pooling_(pooling), free_seqs_(std::move(seqs)),
      budget_(budget <= 0 ? family.n_ubatch() : std::min(budget, family.n_ubatch())) {
    if (free_seqs_.empty()) throw std::invalid_argument("an embedder needs a sequence to run on");
    for (int s : free_seqs_)
        if (s < 0 || s >= family.n_seq())
            throw std::invalid_argument("sequence " + std::to_string(s) + " is not one of the family's");
    // Taken from the back: the first sequence given runs the first input.
    std::reverse(free_seqs_.begin(), free_seqs_.end());
}

size_t Embedder::add(std::vector<int32_t> ids) {
    if (ids.empty()) throw std::invalid_argument("an input has no tokens");
    if (int64_t(ids.size()) > family_.n_ctx())
        throw std::length_error("an input has " + std::to_string(ids.size()) + " tokens but the context holds " +
                                std::to_string(family_.n_ctx()));
    Input in;
    in.ids = std::move(ids);
    inputs_.push_back(std::move(in));
    return inputs_.size() - 1;
}

void Embedder::run() {
    while (step()) {
    }
}

bool Embedder::step() {
    while (first_open_ < inputs_.size() && inputs_[first_open_].done) ++first_open_;
    if (first_open_ == inputs_.size()) return false;
    Batch b;
    b.hidden = true;
    owner_.clear();
    int left = budget_;
    // The inputs in progress go on first, then the next ones take free sequences, while the step has room.
    for (int pass = 0; pass < 2 && left > 0; ++pass)
        for (size_t i = first_open_; i < inputs_.size() && left > 0; ++i) {
            Input& in = inputs_[i];
            if (in.done || (pass == 0) != (in.seq >= 0)) continue;
            if (in.seq < 0) {
                if (free_seqs_.empty()) break;
                in.seq = free_seqs_.back();
                free_seqs_.pop_back();
            }
            const size_t n = std::min(in.ids.size() - in.fed, size_t(left));
            const size_t last = in.ids.size() - 1;
            for (size_t t = in.fed; t < in.fed + n; ++t) {
                const bool want = pooling_ == Pooling::none || pooling_ == Pooling::mean ||
                                  (pooling_ == Pooling::cls && t == 0) || (pooling_ == Pooling::last && t == last);
                b.add(in.ids[t], in.seq, int32_t(t), want);
                if (want) owner_.push_back(i);
            }
            left -= int(n);
        }
    backend::Act out;
    try {
        out = family_.step(b);
    } catch (...) {
        restart_open();
        throw;
    }
    const size_t width = size_t(family_.n_embd());
    rows_.resize(owner_.size() * width);
    if (!owner_.empty()) be_.download(out, rows_);
    // Each row wanted to its input, in the order the batch holds them.
    for (size_t r = 0; r < owner_.size(); ++r) {
        Input& in = inputs_[owner_[r]];
        const float* row = rows_.data() + r * width;
        if (pooling_ == Pooling::mean) {
            in.sum.resize(width, 0.0);
            for (size_t c = 0; c < width; ++c) in.sum[c] += row[c];
        } else {
            in.out.insert(in.out.end(), row, row + width);
        }
    }
    // The rows of each input of the step are consecutive: count them to advance it.
    for (size_t t = 0; t < b.size();) {
        const int seq = b.seq[t];
        size_t n = 0;
        while (t < b.size() && b.seq[t] == seq) ++t, ++n;
        Input& in = *std::find_if(inputs_.begin() + std::ptrdiff_t(first_open_), inputs_.end(),
                                  [&](const Input& x) { return !x.done && x.seq == seq; });
        in.fed += n;
        if (in.fed == in.ids.size()) finish(in);
    }
    return true;
}

void Embedder::finish(Input& in) {
    if (pooling_ == Pooling::mean) {
        in.out.resize(in.sum.size());
        for (size_t c = 0; c < in.sum.size(); ++c) in.out[c] = float(in.sum[c] / double(in.ids.size()));
        in.sum = {};
    }
    family_.release(in.seq);
    free_seqs_.push_back(in.seq);
    in.seq = -1;
    in.done = true;
    ++n_done_;
    for (float x : in.out)
        if (!std::isfinite(x))
            throw std::runtime_error("the model computed a NaN or an infinity in an embedding of " +
                                     std::to_string(in.ids.size()) +
                                     " tokens: the file's weights are damaged, or their values overflow");
}

void Embedder::restart_open() {
    for (Input& in : inputs_) {
        if (in.done || in.seq < 0) continue;
        family_.release(in.seq);
        free_seqs_.push_back(in.seq);
        in.seq = -1;
        in.fed = 0;
        in.sum = {};
        in.out.clear();
    }
}

}  // namespace zinc::engine
