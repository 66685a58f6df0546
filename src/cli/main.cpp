#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/printable.h"

namespace {

// Exit status: 0 done, 1 the work failed, 2 the command line was refused.
constexpr int kFailed = 1, kUsage = 2;

// llama.cpp's multi-letter single-dash spellings, read as wholes: CLI11 takes "-ngl 99" for "-n gl 99".
const std::map<std::string, std::string> kSpellings = {
    {"-ngl", "--n-gpu-layers"}, {"-npl", "--npl"},         {"-pg", "--pg"},           {"-sys", "--system-prompt"},
    {"-ub", "--ubatch-size"},   {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}, {"-pps", "--pps"},
    {"-np", "--parallel"},      {"-fa", "--flash-attn"},    {"-hf", "--hf-repo"},      {"-hfr", "--hf-repo"}};

bool letters_only(const std::string& s) {
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
    return !s.empty();
}

std::string command_list(CLI::App& app) {
    std::string s;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; }))
        s += (s.empty() ? "" : ", ") + c->get_name();
    return s;
}

std::string help_hint(const std::string& command) {
    return "Run 'zinc" + (command.empty() ? "" : " " + command) + " --help' for the options.\n";
}

// The edits that make a into b (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

// The option of `cmd` whose name (long, or a llama.cpp spelling) is closest to `word`, as the option is written; empty
// when none is within half the word's length.
std::string nearest_option(const CLI::App& cmd, const std::string& word) {
    std::string best;
    size_t best_d = word.size() / 2 + 1;
    const auto consider = [&](const std::string& name, const std::string& shown) {
        const size_t d = edit_distance(word, name);
        if (d < best_d) {
            best_d = d;
            best = shown;
        }
    };
    for (const CLI::Option* o : cmd.get_options()) {
        for (const std::string& l : o->get_lnames()) consider(l, "--" + l);
        for (const std::string& sn : o->get_snames()) consider(sn, "-" + sn);
    }
    for (const auto& [spelling, long_name] : kSpellings)
        if (cmd.get_option_no_throw(long_name)) consider(spelling.substr(1), spelling);
    return best;
}

// The arguments with the multi-letter spellings replaced, and the command they name. A single dash followed by
// several letters is otherwise refused, naming the nearest option: CLI11 would split it into a one-letter option and
// a value ("-xyz" as "-x yz"), which is hardly ever what was meant. Values of options are left alone ("-p -ub" is a
// prompt).
std::vector<std::string> normalise(CLI::App& app, int argc, char** argv, std::string& command) {
    std::vector<std::string> out;
    CLI::App* cmd = nullptr;
    bool value_next = false, rest = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (rest || value_next) {
            value_next = false;
            out.push_back(a);
            continue;
        }
        if (a == "--") {
            rest = true;
        } else if (a.size() > 2 && a[0] == '-' && a[1] != '-' && letters_only(a.substr(1))) {
            const auto it = kSpellings.find(a);
            if (it == kSpellings.end()) {
                const std::string near = cmd ? nearest_option(*cmd, a.substr(1)) : std::string();
                throw CLI::ValidationError(a, "zinc" + (cmd ? " " + cmd->get_name() : std::string()) +
                                                  " has no option " + a +
                                                  (near.empty() ? std::string() : "; the nearest is " + near));
            }
            a = it->second;
        } else if (!cmd && !a.empty() && a[0] != '-') {
            for (CLI::App* c : app.get_subcommands([](CLI::App*) { return true; }))
                if (c->get_name() == a) cmd = c;
            if (cmd) command = a;
            if (!cmd)
                throw CLI::ValidationError("unknown command '" + a + "'", "the commands are " + command_list(app));
        }
        if (cmd && a.size() > 1 && a[0] == '-' && a.find('=') == std::string::npos) {
            const CLI::Option* opt = cmd->get_option_no_throw(a);
            value_next = opt && opt->get_items_expected_max() > 0;
        }
        out.push_back(a);
    }
    return out;
}

// What the command wrote to stdout must have arrived: a full disk or a closed file fails the command.
int finish(int status) {
    std::cout.flush();
    try {
        if (!std::cout) throw std::runtime_error("cannot write to standard output");
        zinc::cli::check_stdout();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zinc: error: %s\n", e.what());
        return kFailed;
    }
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"zinc: inference engine for GGUF language models ('zinc COMMAND --help' lists a command's options)",
                 "zinc"};
    // A flag given twice means its last value, as in most command lines (llama.cpp's too).
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.require_subcommand(1);
    app.set_version_flag("--version", "zinc 0.1.0");
    app.failure_message([](const CLI::App* a, const CLI::Error& e) {
        std::string cmd;
        for (const CLI::App* s : a->get_subcommands()) cmd += (cmd.empty() ? "" : " ") + s->get_name();
        return "zinc: error: " + std::string(e.what()) + "\n" + help_hint(cmd);
    });
    zinc::cli::register_devices(app);
    zinc::cli::register_inspect(app);
    zinc::cli::register_run(app);
    zinc::cli::register_chat(app);
    zinc::cli::register_bench(app);
    zinc::cli::register_logits(app);
    zinc::cli::register_embed(app);
    zinc::cli::register_perplexity(app);
    zinc::cli::register_tokenize(app);
    zinc::cli::register_detokenize(app);
    zinc::cli::register_synth(app);
    zinc::cli::register_quantize(app);
    zinc::cli::register_template(app);
    zinc::cli::register_serve(app);
    zinc::cli::register_pull(app);
    if (argc < 2) {
        std::cout << app.help();
        return finish(0);
    }
    std::vector<std::string> args;
    std::string command;
    try {
        args = normalise(app, argc, argv, command);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "zinc: error: %s\n%s", e.what(), help_hint(command).c_str());
        return kUsage;
    }
    try {
        std::reverse(args.begin(), args.end());  // CLI11 takes them last first
        app.parse(args);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? finish(0) : kUsage;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        // Messages quote files, templates and requests: nothing in them may act on the terminal.
        std::fprintf(stderr, "zinc: error: %s\n", zinc::gguf::terminal_text(e.what()).c_str());
        return kFailed;
    }
    return finish(0);
}
