#include "rendezvous/elastic_settings.h"

#include <map>
#include <sstream>

#include <ringtorch/error.h>

#include "base/parse.h"

namespace ringtorch {

void parse_rdzv_conf(const std::string& text, ElasticSettings* s) {
  const std::map<std::string, std::chrono::milliseconds*> durations = {
      {"join_timeout", &s->join_timeout},
      {"last_call_timeout", &s->last_call_timeout},
      {"keep_alive_interval", &s->keep_alive_interval},
      {"admit_interval", &s->admit_interval},
  };
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const std::string what = "--rdzv_conf " + name;
    if (auto d = durations.find(name); d != durations.end()) {
      *d->second = parse_seconds(value, what);
    } else if (name == "keep_alive_max_attempt") {
      s->keep_alive_max_attempt = parse_int_in_range(value, 1, 1000, what);
    } else {
      throw InvalidArgumentError(str_cat("--rdzv_conf: unknown key '", name,
                                         "'; known: join_timeout, last_call_timeout, keep_alive_interval, "
                                         "keep_alive_max_attempt, admit_interval (seconds, e.g. join_timeout=60); "
                                         "and ringrun's password_file=PATH"));
    }
  }
}

}  // namespace ringtorch
