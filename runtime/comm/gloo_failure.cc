#include "runtime/comm/gloo_failure.h"

#include <algorithm>
#include <cctype>
#include <exception>

#include <ringtorch/str_cat.h>

namespace ringtorch {
namespace {

// The first "[host]:port" in `text`. Gloo's own "[file.cc:123] " prefix is bracketed too, but
// a space, not ':' and digits, follows its closing bracket.
std::string first_address(const std::string& text) {
  for (size_t open = text.find('['); open != std::string::npos; open = text.find('[', open + 1)) {
    const size_t close = text.find(']', open + 1);
    if (close == std::string::npos) break;
    size_t end = close + 1;
    if (end >= text.size() || text[end] != ':') continue;
    ++end;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end > close + 2 && text.find_first_of(" \t", open) > close) return text.substr(open, end - open);
  }
  return "";
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

GlooFailure read_gloo_failure(const std::string& text) {
  GlooFailure failure;
  const bool timed_out = contains(text, "Timed out") || contains(text, "timed out") || contains(text, "timeout") ||
                         contains(text, "Timeout");
  failure.kind = timed_out ? ErrorKind::kTimeout : ErrorKind::kPeerLost;
  failure.peer_address = first_address(text);
  return failure;
}

std::chrono::milliseconds time_left(std::chrono::steady_clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
}

void wait_for_receive(gloo::transport::UnboundBuffer& buffer, int rank, int peer,
                      std::chrono::steady_clock::time_point deadline, const std::string& what) {
  try {
    buffer.waitRecv(time_left(deadline));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::rethrow_exception(make_error(read_gloo_failure(e.what()).kind, str_cat(e.what(), " (waiting for ", what, ")"),
                                      FailureSite{rank, peer, ""}));
  }
}

}  // namespace ringtorch
