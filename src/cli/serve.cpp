// `zinc serve -m M.gguf`: the OpenAI-compatible HTTP API of src/server/. The address is bound first and the model
// loaded after, so /health answers 503 while it loads; the address it listens on goes to standard error.
#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "chat/turn.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "server/server.h"  // the options only; the server itself is built where Boost.Beast is

namespace zinc::cli {
namespace {

// Sequences that decode together by default on a GPU, where a step of 4 costs little more than a step of one.
constexpr int kGpuParallel = 4;
// The fewest sequences that keep states by default. A turn of a conversation on a recurrent model keeps up to three
// (the end of its history, of its prompt and of its reply), and a template that drops the reasoning at each user
// message makes the turn after one resume two turns back: with 2, every other turn of an agent's conversation was
// read whole.
constexpr int kLeastCacheSeqs = 8;

struct ServeArgs {
    ModelFlags model;
    server::ServerOptions server;
    std::string alias;
    SamplingFlags sampling;     // the defaults of requests that leave sampling out
    std::string template_file;  // --chat-template-file
};

#ifdef ZINC_HAVE_SERVER
// The given template must render a conversation for this model: a broken file is refused at the start, not on
// every request.
void check_template(const engine::OpenedModel& om, const std::string& source, const std::string& path) {
    chat::PromptOptions po;
    po.template_source = source;
    try {
        chat::prepare_turn(om.session->tokenizer(), om.model->get("general.architecture").get_string(),
                           {{"system", "s"}, {"user", "u"}}, po);
    } catch (const std::exception& e) {
        throw std::runtime_error("--chat-template-file " + path + ": " + e.what());
    }
}

// Set by SIGINT and SIGTERM; the main thread stops the server (nothing else is safe in a signal handler).
std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

void run_serve(const ServeArgs& o) {
    server::ServerOptions so = o.server;
    so.sampling = {o.sampling.params, o.sampling.seed};
    if (!o.template_file.empty()) so.chat_template = read_file(o.template_file);
    if (so.parallel == 0) so.parallel = engine::picks_gpu(o.model.open.backend) ? kGpuParallel : 1;
    if (so.cache_seqs < 0) so.cache_seqs = std::max(so.parallel, kLeastCacheSeqs);
    server::Server srv(so);
    const int port = srv.bind();
    std::fprintf(stderr, "zinc: listening on http://%s:%d (loading %s)\n", so.host.c_str(), port,
                 o.model.open.path.c_str());
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::atomic<bool> served{false};
    std::thread http([&] {
        srv.serve();
        served = true;
    });
    // A stop before the server runs would be missed, and serve() would never return.
    auto stop = [&] {
        while (!served && !srv.running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        srv.stop();
        http.join();
    };
    try {
        ModelFlags flags = o.model;
        // Each running sequence with the whole context, in pages of one pool; the kept states in the pages left.
        engine::ContextSize& cs = flags.open.context;
        cs.n_seq = so.parallel + so.cache_seqs;
        cs.kv_seqs = so.parallel;
        engine::OpenedModel om = open_model(flags);
        if (o.model.verbose) std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
        if (!so.chat_template.empty()) check_template(om, so.chat_template, o.template_file);
        const std::string name =
            o.alias.empty() ? std::filesystem::path(o.model.open.path).filename().string() : o.alias;
        srv.set_model(std::move(om), name);
        std::fprintf(stderr, "zinc: ready, serving %s\n", name.c_str());
    } catch (...) {
        stop();
        throw;
    }
    while (!g_stop && !served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop();
}
#else
void run_serve(const ServeArgs&) {
    throw std::runtime_error("this zinc was built without Boost.Beast (Debian: libboost-dev): no zinc serve");
}
#endif

}  // namespace

void register_serve(CLI::App& app) {
    auto o = std::make_shared<ServeArgs>();
    auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
    add_model_options(cmd, o->model);
    server::ServerOptions& so = o->server;
    cmd->add_option("--host", so.host, "the address to listen on (127.0.0.1: this machine only)")
        ->capture_default_str();
    cmd->add_option("--port", so.port, "the port to listen on; 0 = any free port")
        ->capture_default_str()
        ->transform(integer_in(0, 65535));
    cmd->add_option("--api-key", so.api_key, "require \"Authorization: Bearer KEY\" on every request but the page and "
                                             "/health");
    cmd->add_option("--alias", o->alias, "the model's name in the API (default: the file's name)");
    so.parallel = 0;
    so.cache_seqs = -1;
    cmd->add_option("--parallel", so.parallel,
                    "(also -np) requests that decode together (continuous batching); 1: one at a time (default: " +
                        std::to_string(kGpuParallel) + " on a GPU, 1 on the CPU)")
        ->transform(integer_in(1, 256));
    cmd->add_option("--cache-seqs", so.cache_seqs,
                    "states kept for later requests beside the running ones, in the KV pages these leave: a prefix "
                    "cache (default: as many as --parallel, at least " +
                        std::to_string(kLeastCacheSeqs) +
                        "; 0 with -np 1: one request at a time on one sequence, which keeps the prefix of the request "
                        "before)")
        ->transform(integer_in(0, 1024));
    cmd->add_option("--max-queue", so.max_queue, "requests that may wait for the model; more get 503")
        ->capture_default_str()
        ->transform(integer_in(1, 1000));
    cmd->add_option("-n,--max-tokens,--n-predict", so.limits.max_tokens,
                    "the most tokens one reply may have, and what a request that names none gets; 0 = the context's "
                    "size")
        ->capture_default_str()
        ->transform(integer_in(0, INT_MAX));
    cmd->add_option("--timeout", so.timeout_seconds,
                    "seconds a request may generate; then its reply ends (finish_reason \"length\")")
        ->capture_default_str()
        ->transform(integer_in(1, 86400));
    cmd->add_option("--io-timeout", so.io_timeout_seconds,
                    "seconds a client may send nothing, or take nothing of the reply, before it is dropped")
        ->capture_default_str()
        ->transform(integer_in(1, 3600));
    cmd->add_option("--max-body", so.max_body_bytes, "the largest request body, in bytes")
        ->capture_default_str()
        ->transform(integer_in(1024, int64_t(1) << 32));
    cmd->add_option("--allowed-host", so.allowed_hosts,
                    "a host name requests may call the server by (their Host header), \"*\" for any; may be repeated "
                    "(always allowed: IP addresses, localhost and --host)");
    cmd->add_option("--cors-origin", so.cors_origins,
                    "an origin (http://host:port) whose pages may call the API, \"*\" for any; may be repeated "
                    "(default: only the server's own page)");
    cmd->add_flag("--log-disable", [o](int64_t) { o->server.log_requests = false; },
                  "no line on standard error for each request");
    cmd->add_option("--chat-template-file", o->template_file,
                    "a Jinja2 chat template to render every conversation with, instead of the model's")
        ->check(CLI::ExistingFile);
    cmd->add_option_function<std::string>(
           "--pooling", [o](const std::string& p) { o->server.pooling = engine::parse_pooling(p); },
           "how /v1/embeddings pools a text's token states: mean, cls (the first token's) or last (the last token's) "
           "(default: the file's <arch>.pooling_type; a file without one serves no embeddings)")
        ->transform(one_of("a pooling", {"mean", "cls", "last"}));
    cmd->add_flag("--no-normalize", [o](int64_t) { o->server.embd_normalize = false; },
                  "embeddings as pooled, not scaled to length 1 (then a request's dimensions is refused)");
    // The request fields' defaults where a request leaves them out (the OpenAI API's, as the server had them).
    o->sampling.params = o->server.sampling.params;
    add_sampling_options(cmd, o->sampling);
    cmd->callback([o] { run_serve(*o); });
}

}  // namespace zinc::cli
