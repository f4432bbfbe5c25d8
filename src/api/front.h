// What every request goes through before and after its route's handler:
// authentication (Bearer API key), idempotent replays, error answers (with
// Retry-After), one structured log line, and request metrics.
#pragma once

#include "api/router.h"
#include "store/idempotency_store.h"
#include "store/key_store.h"

namespace kiln::api {

class ApiFront {
 public:
  ApiFront(const Router& router, store::KeyStore& keys, store::IdempotencyStore& idempotency)
      : router_(router), keys_(keys), idempotency_(idempotency) {}

  void Handle(Exchange& ex);

 private:
  void Authenticate(Exchange& ex);
  // Runs the route; ApiErrors become their answer here, so that they can be
  // stored for replay like any other.
  void Dispatch(Exchange& ex);
  void DispatchOnce(Exchange& ex, const std::string& idempotency_key);

  const Router& router_;
  store::KeyStore& keys_;
  store::IdempotencyStore& idempotency_;
};

}  // namespace kiln::api
