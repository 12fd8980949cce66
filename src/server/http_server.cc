#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "base/error.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/sse.h"
#include "server/web_assets.h"

namespace kakeya {
namespace {

using nlohmann::json;

void SetError(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.retry_after_s() > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s()));
  if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(DumpJson(e.Body()), "application/json");
}

// Runs a handler, answering what it throws: client errors are answered,
// never thrown past the handler (httplib would send a bare 500).
void Answer(httplib::Response& res, const std::function<void()>& handle) {
  try {
    handle();
  } catch (const ApiError& e) {
    SetError(res, e);
  } catch (const Error& e) {
    SetError(res, BadRequest("", e.what()));
  } catch (const std::bad_alloc&) {
    SetError(res, ApiError(503, "out of memory for this request", "server_error"));
  } catch (const std::exception& e) {
    SetError(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

// The metrics' route label: the routes there are, never a client's path
// (which would make a label value per request).
std::string RouteLabel(const httplib::Request& req) {
  for (const char* route : {"/health", "/v1/models", "/v1/completions", "/v1/chat/completions", "/metrics"}) {
    if (req.path == route) return route;
  }
  if (req.path.starts_with("/v1/models/")) return "/v1/models/{id}";
  if (const WebAsset* asset = FindWebAsset(req.path)) return std::string(asset->path);  // a fixed few
  return "other";
}

// The error body for a status httplib set without one (no route, a body
// over --max-body, an unparseable request).
ApiError StatusError(const httplib::Request& req, int status, size_t max_body) {
  switch (status) {
    case 404:
      return ApiError(404, "no route " + req.method + " " + req.path + " (see GET /v1/models, POST /v1/completions, "
                           "POST /v1/chat/completions)", "not_found_error");
    case 413:
      return ApiError(413, "the request body is larger than the server's --max-body of " + std::to_string(max_body) +
                           " bytes", "invalid_request_error", "", "body_too_large");
    case 400: return ApiError(400, "malformed HTTP request", "invalid_request_error");
    default:
      return ApiError(status, "HTTP status " + std::to_string(status),
                      status >= 500 ? "server_error" : "invalid_request_error");
  }
}

// The body of a POST, read here rather than by httplib, which would parse a
// form-encoded body (curl -d's default type) and refuse one over 8 KiB, and
// take a chunked upload of any length. A declared Content-Length over the
// limit is refused by httplib before the body is buffered (payload_max_length).
std::string ReadBody(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                     size_t max_body) {
  if (req.is_multipart_form_data()) {
    throw ApiError(415, "the body must be JSON (Content-Type: application/json), not multipart/form-data",
                   "invalid_request_error");
  }
  std::string body;
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t n) {
    too_large = body.size() + n > max_body;
    if (!too_large) body.append(data, n);
    return !too_large;
  });
  if (too_large || res.status == 413) throw StatusError(req, 413, max_body);
  if (!read) throw ApiError(400, "the request body could not be read", "invalid_request_error");
  return body;
}

}  // namespace

HttpServer::HttpServer(const Model& model, std::string model_id, Scheduler& scheduler, const ChatPrompt& chat,
                       const HttpOptions& options)
    : model_id_(std::move(model_id)), scheduler_(scheduler), options_(options),
      completions_(model, model_id_, scheduler, chat, counters_), http_(std::make_unique<httplib::Server>()),
      started_(static_cast<int64_t>(std::time(nullptr))) {
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // httplib refuses a larger Content-Length with 413 before reading the body
  // into memory (the bytes are read and dropped, not kept).
  http_->set_payload_max_length(options_.max_body);
  // httplib's default adds SO_REUSEPORT, under which a second server on the
  // same port starts without error and the kernel splits the connections
  // between the two: keep only SO_REUSEADDR (restart while old connections linger).
  http_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  AddRoutes();
}

HttpServer::~HttpServer() = default;

void HttpServer::AddRoutes() {
  httplib::Server& http = *http_;
  // Before the body is read: refuse while draining, and check the key, so
  // that neither costs more than the headers.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (draining_) {
      SetError(res, ApiError(503, "the server is shutting down", "server_error", "", "unavailable"));
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    // The page holds no data (a browser cannot send the key to load it); its
    // requests to the API send the key like any client's.
    if (!options_.api_key.empty() && !FindWebAsset(req.path) && !BearerTokenMatches(req.get_header_value("Authorization"), options_.api_key)) {
      const std::string why = req.has_header("Authorization") ? "the API key is wrong" : "no API key: send the header "
                                                                                         "'Authorization: Bearer KEY'";
      SetError(res, ApiError(401, why, "authentication_error", "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) SetError(res, StatusError(req, res.status, options_.max_body));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SetError(res, ApiError(500, "internal error", "server_error"));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    counters_.CountResponse(RouteLabel(req), res.status);
    std::fprintf(stderr, "kakeya: %s %s %s %d\n", req.remote_addr.c_str(), req.method.c_str(), req.path.c_str(),
                 res.status);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) res.status = 503;
    res.set_content(draining_ ? R"({"status":"shutting down"})" : R"({"status":"ok"})", "application/json");
  });
  auto model_json = [this] {
    return json{{"id", model_id_}, {"object", "model"}, {"created", started_}, {"owned_by", "kakeya"}};
  };
  http.Get("/v1/models", [model_json](const httplib::Request&, httplib::Response& res) {
    res.set_content(DumpJson({{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
  });
  http.Get("/v1/models/(.+)", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == model_id_) return res.set_content(DumpJson(model_json()), "application/json");
    SetError(res, ModelNotFound(req.matches[1].str(), model_id_));
  });
  // A pair, not a structured binding: lambdas capture those only from clang
  // 16 (Xcode 15) on.
  for (const auto& route : {std::pair{"/v1/completions", Endpoint::kCompletions},
                            std::pair{"/v1/chat/completions", Endpoint::kChatCompletions}}) {
    const Endpoint endpoint = route.second;
    http.Post(route.first, [this, endpoint](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
      Answer(res, [&] { completions_.Handle(endpoint, ReadBody(req, res, reader, options_.max_body), res); });
    });
  }
  for (const WebAsset& asset : WebAssets()) {
    // httplib's patterns are regular expressions: the dots in file names
    // match only dots.
    std::string pattern;
    for (char c : asset.path) {
      if (c == '.') pattern += '\\';
      pattern += c;
    }
    http.Get(pattern, [&asset](const httplib::Request&, httplib::Response& res) {
      res.set_header("Content-Security-Policy", std::string(kWebContentSecurityPolicy));
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Cache-Control", "no-cache");  // a new binary's page is not hidden by a cached one
      res.set_content(asset.body.data(), asset.body.size(), std::string(asset.content_type));
    });
  }
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const double uptime = static_cast<double>(std::time(nullptr) - started_);
    res.set_content(PrometheusText(scheduler_.Metrics(), counters_.Get(), uptime), "text/plain; version=0.0.4");
  });
}

int HttpServer::Bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host.c_str())
                                      : (http_->bind_to_port(options_.host.c_str(), options_.port) ? options_.port : -1);
  if (port < 0) {
    Fail("cannot listen on ", options_.host, ":", options_.port,
         " (the port is taken or the address is not this machine's; pass --host/--port)");
  }
  return port;
}

void HttpServer::Serve() {
  serving_ = true;
  if (!stop_requested_) http_->listen_after_bind();
  serving_ = false;
}

void HttpServer::Drain() { draining_ = true; }

void HttpServer::Stop() {
  draining_ = true;
  // httplib cuts chunked responses in progress when it stops: let streams
  // write their last events first.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (completions_.open_jobs() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // httplib's stop() does nothing until the listening loop runs: a Serve
  // that got past its check of stop_requested_ is waited for (or its failed
  // start: it returns).
  stop_requested_ = true;
  while (serving_ && !http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

}  // namespace kakeya
