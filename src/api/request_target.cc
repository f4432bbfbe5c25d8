#include "api/request_target.h"

#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include "api/errors.h"

namespace kiln::api {

std::string PercentEncode(std::string_view text) {
  return boost::urls::encode(text, boost::urls::unreserved_chars);
}

RequestTarget ParseRequestTarget(std::string_view target) {
  auto url = boost::urls::parse_origin_form(target);
  if (!url) {
    throw ApiError(Code::kInvalidRequest,
                   "malformed HTTP request: the target is not an RFC 3986 path and query (" +
                       url.error().message() + ")");
  }
  RequestTarget out;
  out.path = url->path();
  // params() decodes '+' as a space, the form encoding clients use for queries.
  for (auto param : url->params()) out.query.emplace_back(param.key, param.value);
  return out;
}

}  // namespace kiln::api
