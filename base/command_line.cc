#include "base/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <set>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

namespace ringtorch {
namespace {

// "--foo-bar,--foo_bar" for "--foo-bar" (each name of a comma list).
std::string with_underscore_spellings(const std::string& names) {
  std::string all;
  size_t start = 0;
  while (start <= names.size()) {
    const size_t comma = std::min(names.find(',', start), names.size());
    const std::string name = names.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    all += (all.empty() ? "" : ",") + name;
    if (name.rfind("--", 0) != 0) continue;
    std::string other = name;
    std::replace(other.begin() + 2, other.end(), '-', '_');
    if (other == name) std::replace(other.begin() + 2, other.end(), '_', '-');
    if (other != name) all += "," + other;
  }
  return all;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

struct CommandLine::State {
  std::string program, usage;
  CLI::App app;
  struct Declared {
    CLI::Option* option;
    std::function<void(const std::string&)> set_value;
    std::function<void(bool)> set_flag;
    std::string value;
    std::vector<std::string> values;  // a repeatable flag's, in order
    bool on = false;
  };
  std::vector<std::unique_ptr<Declared>> declared;
  std::vector<std::string> long_names;  // for suggestions
  std::set<std::string> value_names;    // the long names that take a value
  std::vector<std::string> positional_values, rest;
  bool rest_from_first_positional = false;
  int positionals_at_most = 0;  // 0: none allowed

  State(std::string p, std::string u) : program(std::move(p)), usage(std::move(u)), app(program, program) {}

  // Registers one declared flag: `add` makes its CLI11 option, bound to the Declared's storage.
  template <typename Add>
  void declare(std::unique_ptr<Declared> d, const Add& add) {
    d->option = add(*d);
    for (const std::string& n : d->option->get_lnames()) {
      long_names.push_back(n);
      if (!d->set_flag) value_names.insert(n);
    }
    declared.push_back(std::move(d));
  }

  // "--name=" with nothing after it as "--name" "": CLI11 would otherwise take the next argument
  // as the value. Only the flags' part of the line: a program's own arguments stay as given.
  std::vector<std::string> split_empty_values(const std::vector<std::string>& args) const {
    std::vector<std::string> out;
    bool flags = true;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& arg = args[i];
      if (!flags) {
        out.push_back(arg);
        continue;
      }
      const bool dashes = arg.size() > 2 && arg.compare(0, 2, "--") == 0;
      const std::string name = dashes ? arg.substr(2, arg.find('=') - 2) : "";
      if (dashes && arg.back() == '=' && arg.find('=') == arg.size() - 1 && value_names.count(name)) {
        out.push_back(arg.substr(0, arg.size() - 1));
        out.emplace_back();
        continue;
      }
      out.push_back(arg);
      if (arg == "--") {
        flags = false;
      } else if (dashes && arg.find('=') == std::string::npos && value_names.count(name) && i + 1 < args.size()) {
        out.push_back(args[++i]);  // its value, whatever it looks like
      } else if (!dashes && (arg.empty() || arg[0] != '-') && rest_from_first_positional) {
        flags = false;  // the program and its arguments start here
      }
    }
    return out;
  }

  // "; did you mean --nproc-per-node?" when a declared flag is close to `given`.
  std::string suggestion(std::string given) const {
    given = given.substr(0, given.find('='));
    while (!given.empty() && given.front() == '-') given.erase(0, 1);
    std::replace(given.begin(), given.end(), '_', '-');
    std::string best;
    size_t best_distance = std::max<size_t>(2, given.size() / 3) + 1;
    for (const std::string& name : long_names) {
      const size_t d = edit_distance(given, name);
      if (d < best_distance || (d == best_distance && best.empty() && name.rfind(given, 0) == 0)) {
        best_distance = d;
        best = name;
      }
    }
    return best.empty() ? "" : str_cat("; did you mean --", best, "?");
  }

  [[noreturn]] void fail(const std::string& what, const std::string& flag = "") const {
    throw InvalidArgumentError(str_cat(what, flag.empty() ? "" : suggestion(flag), " (see ", program, " --help)"));
  }
};

CommandLine::CommandLine(std::string program, std::string usage)
    : state_(std::make_unique<State>(std::move(program), std::move(usage))) {
  CLI::App& app = state_->app;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag("-h,--help");
  const std::string* text = &state_->usage;
  app.formatter_fn([text](const CLI::App*, std::string, CLI::AppFormatMode) { return *text; });
  app.allow_extras(false);
}

CommandLine::~CommandLine() = default;

CommandLine& CommandLine::option(const std::string& name, std::function<void(const std::string&)> set) {
  auto declared = std::make_unique<State::Declared>();
  declared->set_value = std::move(set);
  state_->declare(std::move(declared),
                  [&](State::Declared& d) { return state_->app.add_option(with_underscore_spellings(name), d.value); });
  return *this;
}

CommandLine& CommandLine::repeatable(const std::string& name, std::function<void(const std::string&)> set) {
  auto declared = std::make_unique<State::Declared>();
  declared->set_value = std::move(set);
  state_->declare(std::move(declared), [&](State::Declared& d) {
    return state_->app.add_option(with_underscore_spellings(name), d.values)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->expected(1)
        ->allow_extra_args(false);
  });
  return *this;
}

CommandLine& CommandLine::flag(const std::string& name, std::function<void(bool)> set) {
  auto declared = std::make_unique<State::Declared>();
  declared->set_flag = std::move(set);
  state_->declare(std::move(declared),
                  [&](State::Declared& d) { return state_->app.add_flag(with_underscore_spellings(name), d.on); });
  return *this;
}

CommandLine& CommandLine::ignored(const std::string& name) {
  return option(name, [](const std::string&) {});
}

CommandLine& CommandLine::rest_from_first_positional() {
  state_->rest_from_first_positional = true;
  state_->app.prefix_command();
  return *this;
}

CommandLine& CommandLine::positionals(int at_most) {
  state_->positionals_at_most = at_most;
  state_->app.add_option("arguments", state_->positional_values)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  return *this;
}

bool CommandLine::parse(const std::vector<std::string>& args) {
  State& s = *state_;
  const std::vector<std::string> split = s.split_empty_values(args);
  std::vector<std::string> reversed(split.rbegin(), split.rend());  // CLI11 reads from the back
  try {
    s.app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return false;
  } catch (const CLI::ExtrasError&) {
    // The first argument no flag took.
    for (const std::string& arg : s.app.remaining()) {
      if (arg.size() > 1 && arg[0] == '-') s.fail(str_cat("unknown flag ", arg.substr(0, arg.find('='))), arg);
      s.fail(str_cat("unexpected argument '", arg, "'"));
    }
    s.fail("unexpected arguments");
  } catch (const CLI::ArgumentMismatch& e) {
    const std::string what = e.what();  // "--batch-size: 1 required TEXT missing"
    s.fail(str_cat(what.substr(0, what.find(':')), " needs a value"));
  } catch (const CLI::ConversionError& e) {
    // CLI11 says "Could not convert: --resume = maybe"; the flag as it was typed reads better.
    std::string what = e.what();
    const std::string lead = "Could not convert: ";
    if (what.rfind(lead, 0) == 0) what.erase(0, lead.size());
    if (const size_t eq = what.find(" = "); eq != std::string::npos) what.replace(eq, 3, "=");
    s.fail(str_cat(what, ": a flag takes true or false (1 or 0, yes or no, on or off)"));
  } catch (const CLI::ParseError& e) {
    s.fail(e.what());
  }
  s.rest.clear();
  if (s.rest_from_first_positional) {
    s.rest = s.app.remaining();
    if (!s.rest.empty() && s.rest.front() != "--" && s.rest.front().size() > 1 && s.rest.front()[0] == '-') {
      s.fail(str_cat("unknown flag ", s.rest.front().substr(0, s.rest.front().find('='))), s.rest.front());
    }
    if (!s.rest.empty() && s.rest.front() == "--") s.rest.erase(s.rest.begin());
  } else {
    s.rest = s.positional_values;
    if (s.positionals_at_most >= 0 && static_cast<int>(s.rest.size()) > s.positionals_at_most) {
      const std::string& extra = s.rest[static_cast<size_t>(s.positionals_at_most)];
      if (extra.size() > 1 && extra[0] == '-') s.fail(str_cat("unknown flag ", extra), extra);
      s.fail(str_cat("unexpected argument '", extra, "'"));
    }
  }
  for (const auto& d : s.declared) {
    if (d->option->count() == 0) continue;
    if (d->set_value && !d->values.empty()) {
      for (const std::string& value : d->values) d->set_value(value);
    } else if (d->set_value) {
      d->set_value(d->value);
    }
    if (d->set_flag) d->set_flag(d->on);
  }
  return true;
}

const std::vector<std::string>& CommandLine::rest() const { return state_->rest; }

int CommandLine::parse_main(int argc, char** argv) {
  try {
    if (!parse(std::vector<std::string>(argv + 1, argv + argc))) {
      std::fputs(state_->usage.c_str(), stdout);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", state_->program.c_str(), e.what());
    return 2;
  }
  return -1;
}

const std::string& CommandLine::program() const { return state_->program; }
const std::string& CommandLine::usage() const { return state_->usage; }

}  // namespace ringtorch
