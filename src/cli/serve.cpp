// `zinc serve -m M.gguf`: the OpenAI-compatible HTTP API of src/server/. The address is bound first and the model
// loaded after, so /health answers 503 while it loads; the address it listens on goes to standard error.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/options.h"
#ifdef ZINC_HAVE_SERVER
#include "server/server.h"
#endif

namespace zinc::cli {
namespace {

struct Options {
    ModelFlags model;
    std::string host = "127.0.0.1", api_key, alias;
    int port = 8080, max_queue = 16;
};

#ifdef ZINC_HAVE_SERVER
server::Server* g_server = nullptr;

void on_signal(int) {
    if (g_server) g_server->stop();
}

void run(const Options& o) {
    server::ServerOptions so;
    so.host = o.host;
    so.port = o.port;
    so.api_key = o.api_key;
    so.max_queue = o.max_queue;
    server::Server srv(so);
    const int port = srv.bind();
    std::fprintf(stderr, "zinc: listening on http://%s:%d (loading %s)\n", o.host.c_str(), port,
                 o.model.open.path.c_str());
    g_server = &srv;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::atomic<bool> served{false};
    std::thread http([&] {
        srv.serve();
        served = true;
    });
    try {
        engine::OpenedModel om = open_model(o.model);
        if (o.model.verbose) std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
        const std::string name =
            o.alias.empty() ? std::filesystem::path(o.model.open.path).filename().string() : o.alias;
        srv.set_model(std::move(om), name);
        std::fprintf(stderr, "zinc: ready, serving %s\n", name.c_str());
    } catch (...) {
        // A stop before the server runs would be missed, and serve() would never return.
        while (!served && !srv.running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        srv.stop();
        http.join();
        g_server = nullptr;
        throw;
    }
    http.join();
    g_server = nullptr;
}
#else
void run(const Options&) {
    throw std::runtime_error("this zinc was built without cpp-httplib (Debian: libcpp-httplib-dev): no zinc serve");
}
#endif

}  // namespace

void register_serve(CLI::App& app) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
    add_model_options(cmd, o->model);
    cmd->add_option("--host", o->host, "the address to listen on (127.0.0.1: this machine only)")->capture_default_str();
    cmd->add_option("--port", o->port, "the port to listen on; 0 = any free port")
        ->capture_default_str()
        ->transform(integer_in(0, 65535));
    cmd->add_option("--api-key", o->api_key, "require \"Authorization: Bearer KEY\" on /v1 requests");
    cmd->add_option("--alias", o->alias, "the model's name in the API (default: the file's name)");
    cmd->add_option("--max-queue", o->max_queue, "requests that may wait for the model; more get 503")
        ->capture_default_str()
        ->transform(integer_in(1, 4096));
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
