// `zinc perplexity`: the perplexity of a model on a text, and the KL divergence of a model from a reference, as
// llama-perplexity computes and prints them (engine/perplexity.h). The running estimate goes to stderr chunk by
// chunk; the results go to stdout.
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/perplexity.h"
#include "model/metadata.h"
#include "tokenizer/tokenizer.h"

namespace zinc::cli {
namespace {

struct PerplexityArgs {
    ModelFlags model;
    PromptFlags text;
    CLI::Option* ctx_option = nullptr;
    int chunks = 0;  // 0: all
    std::string base;
    int top_k = 0;  // 0: llama-perplexity's format
    bool kl = false;
};

__attribute__((format(printf, 1, 2))) std::string text(const char* fmt, ...) {
    va_list a, b;
    va_start(a, fmt);
    va_copy(b, a);
    const int n = std::vsnprintf(nullptr, 0, fmt, a);
    va_end(a);
    std::string s(static_cast<size_t>(std::max(n, 0)), '\0');
    std::vsnprintf(s.data(), s.size() + 1, fmt, b);
    va_end(b);
    return s;
}

// llama-perplexity's line after the first chunk: "2.15 seconds per pass - ETA 1 hours 3.20 minutes".
void print_eta(const char* what, double seconds, int n_chunk) {
    std::string s = text("%s: %.2f seconds per pass - ETA ", what, seconds);
    int total = static_cast<int>(seconds * n_chunk);
    if (total >= 3600) {
        s += text("%d hours ", total / 3600);
        total %= 3600;
    }
    std::fprintf(stderr, "%s%.2f minutes\n", s.c_str(), total / 60.0);
}

std::string speed(int n_chunk, int n_ctx, double seconds, double tok_s) {
    return text("%d chunks of %d tokens in %.2f s: %.1f tok/s\n", n_chunk, n_ctx, seconds, tok_s);
}

void print_plan(const PerplexityArgs& o, const engine::OpenedModel& om) {
    if (o.model.verbose) std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
}

void run_perplexity(const PerplexityArgs& o) {
    if (o.text.file.empty() && stdin_is_terminal())
        throw CLI::ValidationError("no text", "give it with -f FILE or on standard input");
    const std::string input = read_prompt(o.text);  // before the model is read
    ModelFlags flags = o.model;
    flags.open.all_logits = true;
    const int n_ctx = flags.open.context.n_ctx;
    if (n_ctx < 3)
        throw CLI::ValidationError("--ctx-size", "perplexity scores the second half of each chunk after its first: "
                                                 "a context of at least 3 tokens, not " + std::to_string(n_ctx));
    auto model = std::make_unique<gguf::Model>(flags.open.path);
    const std::vector<int32_t> tokens =
        engine::perplexity_tokens(tokenizer::Tokenizer::from_gguf(model->first()), input);
    engine::check_token_count(tokens.size(), n_ctx);  // before the weights are loaded
    if (!o.base.empty()) gguf::check_output_path(o.base, model.get(), false);
    engine::OpenedModel om = open_model(flags, std::move(model));
    print_plan(o, om);
    engine::Family& family = om.session->family();

    engine::PerplexityOptions po;
    po.n_ctx = n_ctx;
    po.max_chunks = o.chunks;
    po.threads = flags.open.backend.threads;
    po.save_base = o.base;
    po.top_k = o.top_k;
    const int n_chunk = engine::chunk_count(tokens.size(), n_ctx, o.chunks);
    std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, each scored on its last %d tokens\n", tokens.size(),
                 n_chunk, n_ctx, n_ctx - 1 - n_ctx / 2);
    if (!o.base.empty() && o.top_k == 0)
        std::fprintf(stderr, "perplexity: saving the log-probabilities of all %d tokens at every scored position to %s "
                             "(llama-perplexity's format)\n", family.n_vocab(), o.base.c_str());
    else if (!o.base.empty())
        std::fprintf(stderr, "perplexity: saving the %d most probable tokens of every scored position to %s (zinc's "
                             "top-K format: its KL divergence lumps the other tokens and reads lower than "
                             "llama-perplexity's)\n", std::min(po.top_k, family.n_vocab()), o.base.c_str());
    po.on_chunk = [](int chunk, int n, const engine::NllSums& nll, double seconds) {
        if (chunk == 0) print_eta("perplexity", seconds, n);
        std::fprintf(stderr, "[%d]%.4f,", chunk + 1, nll.ppl());
        if (chunk + 1 == n) std::fputc('\n', stderr);
        std::fflush(stderr);
    };
    const engine::PerplexityResult r = engine::perplexity(family, engine::vocabulary_of(*om.session), tokens, po);
    const double err = r.nll.ppl_error();
    if (std::isfinite(err))
        write_out(text("Final estimate: PPL = %.4f +/- %.5f\n", r.nll.ppl(), err));
    else
        write_out(text("Final estimate: PPL = %.4f (no standard error: %s)\n", r.nll.ppl(),
                       r.nll.count < 2 ? "fewer than two positions were scored" : "the log-probabilities do not vary"));
    write_out(speed(r.n_chunk, r.n_ctx, r.seconds, r.tokens_per_second()));
    if (!o.base.empty())
        std::fprintf(stderr, "perplexity: wrote %s (%" PRId64 " scored positions, %.1f KiB)\n", o.base.c_str(),
                     r.nll.count, double(r.base_bytes) / 1024.0);
}

void print_kl_row(int chunk, const engine::KlSums& s) {
    const engine::KlSummary m = engine::summarize(s);
    std::fprintf(stderr,
                 "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f"
                 "    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
                 chunk + 1, m.ppl.value, m.ppl.error, m.ln_ppl_ratio.value, m.ln_ppl_ratio.error, m.kld.value,
                 m.kld.error, 100 * m.p_diff_rms.value, 100 * m.p_diff_rms.error, 100 * m.same_top.value,
                 100 * m.same_top.error);
    std::fflush(stderr);
}

std::string kl_report(const engine::KlResult& r) {
    const engine::KlSummary m = engine::summarize(r.sums);
    std::string s = "====== Perplexity statistics ======\n";
    s += text("Mean PPL(Q)                   : %10.6f ± %10.6f\n", m.ppl.value, m.ppl.error);
    s += text("Mean PPL(base)                : %10.6f ± %10.6f\n", m.ppl_base.value, m.ppl_base.error);
    s += text("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * m.ln_ppl_cor);
    s += text("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", m.ln_ppl_ratio.value, m.ln_ppl_ratio.error);
    s += text("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", m.ppl_ratio.value, m.ppl_ratio.error);
    s += text("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", m.ppl_diff.value, m.ppl_diff.error);
    s += "\n====== KL divergence statistics ======\n";
    s += text("Mean    KLD: %10.6f ± %10.6f\n", m.kld.value, m.kld.error);
    const std::span<const float> kld(r.kld), dp(r.p_diff);
    s += text("Maximum KLD: %10.6f\n", kld.back());
    for (const auto& [name, f] : {std::pair{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}})
        s += text("%s   KLD: %10.6f\n", name, engine::percentile(kld, f));
    s += text("Median  KLD: %10.6f\n", engine::median(kld));
    for (const auto& [name, f] : {std::pair{"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}})
        s += text("%s   KLD: %10.6f\n", name, engine::percentile(kld, f));
    s += text("Minimum KLD: %10.6f\n", kld.front());
    s += "\n====== Token probability statistics ======\n";
    s += text("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * m.p_diff.value, 100 * m.p_diff.error);
    s += text("Maximum Δp: %6.3f%%\n", 100 * dp.back());
    for (const auto& [name, f] : {std::pair{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f},
                                  {"75.0%", 0.750f}})
        s += text("%s   Δp: %6.3f%%\n", name, 100 * engine::percentile(dp, f));
    s += text("Median  Δp: %6.3f%%\n", 100 * engine::median(dp));
    for (const auto& [name, f] : {std::pair{"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f},
                                  {" 0.1%", 0.001f}})
        s += text("%s   Δp: %6.3f%%\n", name, 100 * engine::percentile(dp, f));
    s += text("Minimum Δp: %6.3f%%\n", 100 * dp.front());
    s += text("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * m.p_diff_rms.value, 100 * m.p_diff_rms.error);
    s += text("Same top p: %6.3f ± %5.3f %%\n", 100 * m.same_top.value, 100 * m.same_top.error);
    return s;
}

void run_kl_divergence(const PerplexityArgs& o) {
    engine::KlBaseReader base(o.base);
    const engine::KlBaseHeader& h = base.header();
    ModelFlags flags = o.model;
    flags.open.all_logits = true;
    if (o.ctx_option->count() > 0 && flags.open.context.n_ctx != h.n_ctx)
        throw CLI::ValidationError("--ctx-size", text("%s was made with chunks of %d tokens; leave -c out or give "
                                                      "-c %d", o.base.c_str(), h.n_ctx, h.n_ctx));
    flags.open.context.n_ctx = h.n_ctx;
    auto model = std::make_unique<gguf::Model>(flags.open.path);
    // The vocabulary is checked before the weights are loaded.
    const engine::Vocabulary vocabulary =
        engine::vocabulary_of(tokenizer::Tokenizer::from_gguf(model->first()),
                              static_cast<int32_t>(model::Metadata(*model).n_vocab()));
    base.check(vocabulary);
    if (!o.text.file.empty())
        std::fprintf(stderr, "zinc: note: --kl-divergence evaluates the tokens stored in %s; %s is not read\n",
                     o.base.c_str(), o.text.file.c_str());
    engine::OpenedModel om = open_model(flags, std::move(model));
    print_plan(o, om);

    engine::KlOptions ko;
    ko.max_chunks = o.chunks;
    ko.threads = flags.open.backend.threads;
    const int n_chunk = o.chunks > 0 ? std::min(o.chunks, h.n_chunk) : h.n_chunk;
    if (h.format == engine::KlBaseFormat::full)
        std::fprintf(stderr, "kl_divergence: %d chunks of %d tokens from %s (llama-perplexity's format: every token's "
                             "log-probability)\n", n_chunk, h.n_ctx, o.base.c_str());
    else
        std::fprintf(stderr, "kl_divergence: %d chunks of %d tokens from %s (zinc's top-K format: its %d most probable "
                             "tokens per position, the others lumped into one outcome)\n",
                     n_chunk, h.n_ctx, o.base.c_str(), h.top_k);
    ko.on_chunk = [](int chunk, int n, const engine::KlSums& s, double seconds) {
        if (chunk == 0) {
            print_eta("kl_divergence", seconds, n);
            std::fprintf(stderr, "\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence    "
                                 "          Δp RMS            Same top p\n");
        }
        print_kl_row(chunk, s);
    };
    const engine::KlResult r = engine::kl_divergence(om.session->family(), vocabulary, base, ko);
    if (r.sums.count < 100)
        std::fprintf(stderr, "zinc: warning: only %" PRId64 " positions were scored; the statistics are rough\n",
                     r.sums.count);
    write_out("\n" + kl_report(r) + "\n" + speed(r.n_chunk, r.n_ctx, r.seconds, r.tokens_per_second()));
}

}  // namespace

void register_perplexity(CLI::App& app) {
    auto o = std::make_shared<PerplexityArgs>();
    auto* cmd = app.add_subcommand("perplexity", "Perplexity of a model on a text, or its KL divergence from a "
                                                 "reference model, as llama-perplexity computes them");
    o->model.open.context.n_ctx = engine::kPerplexityContext;
    add_model_options(cmd, o->model);
    o->ctx_option = cmd->get_option("--ctx-size");
    o->ctx_option->description("tokens per chunk; each is scored on its second half (default: " +
                               std::to_string(engine::kPerplexityContext) + ", or the base's with --kl-divergence)");
    o->text.file_option = cmd->add_option("-f,--file", o->text.file,
                                          "the text, '-' for standard input (also read when -f is not given)");
    cmd->add_option("--chunks", o->chunks, "chunks to evaluate at most (default: all)")
        ->transform(integer_in(1, INT_MAX));
    auto* base = cmd->add_option("--kl-divergence-base,--save-all-logits", o->base,
                                 "file of the reference model's log-probabilities at every scored position, in "
                                 "llama-perplexity's format (either engine reads the other's): written, or read "
                                 "with --kl-divergence (either format, told by the file)");
    auto* kl = cmd->add_flag("--kl-divergence", o->kl,
                             "compare the model with the reference of --kl-divergence-base on its tokens (no text "
                             "needed)")
                   ->needs(base);
    cmd->add_option("--kl-base-top-k", o->top_k,
                    "write zinc's compact base instead: only the reference's K most probable tokens per position "
                    "(8 + 8 K bytes instead of 2 per vocabulary token); llama-perplexity cannot read it, and its KL "
                    "divergence lumps the other tokens into one outcome, so it reads lower than llama-perplexity's")
        ->needs(base)
        ->excludes(kl)
        ->transform(integer_in(1, INT_MAX));
    cmd->callback([o] {
        if (o->kl)
            run_kl_divergence(*o);
        else
            run_perplexity(*o);
    });
}

}  // namespace zinc::cli
