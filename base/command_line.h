// Command lines in torchrun's dialect (argparse's), for every ringtorch program: one place that
// decides how flags are spelled and what a bad one does, with CLI11 (Debian's libcli11-dev)
// underneath.
//
//   --foo-bar and --foo_bar      one flag (both spellings are registered)
//   --flag VALUE, --flag=VALUE   either form; a flag given twice: the last one counts
//   --flag, --flag=false         a boolean flag (true/false, 1/0, yes/no, on/off)
//   -h, --help                   the program's usage on stdout, exit 0
//   anything unknown or malformed  "<program>: <what>; did you mean --x? (see <program> --help)"
//                                on stderr, exit 2 (argparse's status)
//
// Values are kept as text and handed to each flag's setter once the whole line is read, in the
// order the flags were declared, so that every program checks its values with its own messages
// (base/parse.h) before it does anything else.
//
//   ringtorch::CommandLine cli("ringbench", kUsage);
//   cli.option("--iters", [&](const std::string& v) { iters = parse_int_in_range(v, 1, 1 << 20, "--iters"); });
//   cli.flag("--json", [&](bool on) { json = on; });
//   if (int status = cli.parse_main(argc, argv); status >= 0) return status;
//
// Thread-safety: one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ringtorch {

class CommandLine {
 public:
  CommandLine(std::string program, std::string usage);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // A flag with a value. `name` is "--long-name" (its underscore spelling is added), optionally
  // followed by aliases: "--run-id,--rdzv-id".
  CommandLine& option(const std::string& name, std::function<void(const std::string&)> set);
  // A flag that may be given several times, each value applied in order
  // (--rdzv_conf a=1 --rdzv_conf b=2 is --rdzv_conf a=1,b=2).
  CommandLine& repeatable(const std::string& name, std::function<void(const std::string&)> set);
  // A boolean flag.
  CommandLine& flag(const std::string& name, std::function<void(bool)> set);
  // Accepted with a value and ignored (torch.distributed.launch's --local_rank=N).
  CommandLine& ignored(const std::string& name);
  // The first argument that is not a flag, and every argument after it, are kept verbatim
  // (rest()): `ringrun [flags] PROGRAM ARGS...`. A "--" before it ends the flags.
  CommandLine& rest_from_first_positional();
  // Arguments that are not flags are allowed anywhere and kept in order (rest()), named `what`
  // in the usage error when there are more than `at_most` (-1: no limit).
  CommandLine& positionals(int at_most = -1);

  // Reads `args` (without the program's name). Returns false when help was asked for. Throws
  // InvalidArgumentError for an unknown or malformed flag (with a suggestion when one is
  // close), and whatever the setters throw.
  bool parse(const std::vector<std::string>& args);
  const std::vector<std::string>& rest() const;

  // For a main(): parse(argv[1..]). Help: the usage on stdout, returns 0. An error (from the
  // line or a setter): "<program>: <message>" on stderr, returns 2. Otherwise -1: go on.
  int parse_main(int argc, char** argv);

  const std::string& program() const;
  const std::string& usage() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringtorch
