#include "rendezvous/init_method.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <ringtorch/error.h>

#include "base/parse.h"

namespace ringtorch {
namespace {

constexpr char kFormats[] =
    "expected env://, tcp://HOST:PORT, file:///PATH or redis://[USER:PASSWORD@]HOST[:PORT][/DB]";

[[noreturn]] void fail(const std::string& shown, const std::string& problem) {
  throw InvalidArgumentError(str_cat("init method '", shown, "': ", problem));
}

// Splits "host:port" (or "[v6]:port"); port is optional when default_port is non-zero.
void parse_host_port(const std::string& authority, const std::string& shown, uint16_t default_port, std::string* host,
                     uint16_t* port) {
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) fail(shown, "unterminated IPv6 address '[' in host");
    *host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') fail(shown, "expected ':' after the IPv6 address");
      port_text = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    if (colon == std::string::npos) {
      *host = authority;
    } else {
      *host = authority.substr(0, colon);
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) fail(shown, "empty port after ':'");
    }
  }
  if (host->empty()) fail(shown, "no host; e.g. tcp://10.0.0.1:23456");
  if (port_text.empty()) {
    if (default_port == 0) fail(shown, "no port; e.g. tcp://" + *host + ":23456");
    *port = default_port;
    return;
  }
  *port = static_cast<uint16_t>(parse_int_in_range(port_text, 1, 65535, "port in '" + shown + "'"));
}

std::string percent_decode(const std::string& in, const std::string& shown) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) fail(shown, "truncated %-escape");
      const char hex[3] = {in[i + 1], in[i + 2], 0};
      // Two hex digits exactly (strtol alone would take "%-1" or "% f")
      if (!std::isxdigit(static_cast<unsigned char>(hex[0])) || !std::isxdigit(static_cast<unsigned char>(hex[1]))) {
        fail(shown, "bad %-escape '%" + std::string(hex, 2) + "'");
      }
      out.push_back(static_cast<char>(std::strtol(hex, nullptr, 16)));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

void parse_query(const std::string& query, const std::string& shown, InitMethod* m) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string item = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!item.empty()) {
      auto eq = item.find('=');
      if (eq == std::string::npos) fail(shown, "query parameter '" + item + "' has no value");
      std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      if (key == "rank") {
        m->rank = parse_int_in_range(value, 0, 1 << 24, "rank in '" + shown + "'");
      } else if (key == "world_size") {
        m->world_size = parse_int_in_range(value, 1, 1 << 24, "world_size in '" + shown + "'");
      } else if (key == "timeout") {
        m->timeout = parse_seconds(value, "timeout in '" + shown + "'");
      } else {
        fail(shown, "unknown query parameter '" + key + "' (known: rank, world_size, timeout)");
      }
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
}

}  // namespace

const char* init_scheme_name(InitScheme scheme) {
  switch (scheme) {
    case InitScheme::kEnv:
      return "env";
    case InitScheme::kTcp:
      return "tcp";
    case InitScheme::kFile:
      return "file";
    case InitScheme::kRedis:
      return "redis";
  }
  return "?";
}

InitMethod parse_init_method(const std::string& url) {
  InitMethod m;
  auto sep = url.find("://");
  if (sep == std::string::npos) {
    throw InvalidArgumentError(str_cat("init method '", url, "': no scheme; ", kFormats));
  }
  std::string scheme = url.substr(0, sep);
  std::string rest = url.substr(sep + 3);
  std::string query;
  auto qmark = rest.find('?');
  if (qmark != std::string::npos) {
    query = rest.substr(qmark + 1);
    rest = rest.substr(0, qmark);
  }

  // The text we print never contains the password.
  m.text = url;
  if (scheme == "redis") {
    auto at = rest.rfind('@');
    if (at != std::string::npos) m.text = "redis://***@" + url.substr(sep + 3 + at + 1);
  }
  const std::string& shown = m.text;

  if (scheme == "env") {
    m.scheme = InitScheme::kEnv;
    if (!rest.empty()) fail(shown, "env:// takes no host or path (it reads MASTER_ADDR and MASTER_PORT)");
  } else if (scheme == "tcp") {
    m.scheme = InitScheme::kTcp;
    if (rest.find('/') != std::string::npos) fail(shown, "tcp:// takes HOST:PORT and no path");
    parse_host_port(rest, shown, 0, &m.host, &m.port);
  } else if (scheme == "file") {
    m.scheme = InitScheme::kFile;
    m.path = percent_decode(rest, shown);
    if (m.path.empty()) fail(shown, "no path; e.g. file:///shared/ringtorch-job-42");
    if (m.path[0] != '/') fail(shown, "the path must be absolute: file:///" + m.path);
    if (m.path.back() == '/') fail(shown, "the path names a directory; give a file, e.g. " + m.path + "store");
  } else if (scheme == "redis") {
    m.scheme = InitScheme::kRedis;
    std::string authority = rest;
    auto slash = rest.find('/');
    if (slash != std::string::npos) {
      authority = rest.substr(0, slash);
      std::string db = rest.substr(slash + 1);
      if (!db.empty()) m.db = parse_int_in_range(db, 0, 1 << 20, "database number in '" + shown + "'");
    }
    auto at = authority.rfind('@');
    if (at != std::string::npos) {
      std::string credentials = authority.substr(0, at);
      authority = authority.substr(at + 1);
      auto colon = credentials.find(':');
      if (colon == std::string::npos) {
        m.password = percent_decode(credentials, shown);  // redis://PASSWORD@host
      } else {
        m.user = percent_decode(credentials.substr(0, colon), shown);
        m.password = percent_decode(credentials.substr(colon + 1), shown);
      }
      if (m.password.empty()) fail(shown, "empty password before '@'");
    }
    parse_host_port(authority, shown, 6379, &m.host, &m.port);
  } else {
    throw InvalidArgumentError(str_cat("init method '", shown, "': unknown scheme '", scheme, "://'; ", kFormats));
  }
  parse_query(query, shown, &m);
  return m;
}

}  // namespace ringtorch
