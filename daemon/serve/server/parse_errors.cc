#include "daemon/serve/server/parse_errors.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseErrors final : public grpc::experimental::Interceptor {
 public:
  explicit ParseErrors(const char* method) : method_(method != nullptr ? method : "?") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparsed_ = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        unparsed_ && methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("request: the message to ", method_,
                       " does not parse as its protobuf request (built from another "
                       "proto/autotuned.proto, or not protobuf at all)")));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool unparsed_ = false;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new ParseErrors(info->method());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ParseErrorsFactory() {
  return std::make_unique<Factory>();
}

}  // namespace autotuned
