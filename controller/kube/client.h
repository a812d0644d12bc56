/* The HTTP transport to the Kubernetes API (libcurl): one request in, a parsed
 * JSON body or a typed error out. Each calling thread gets its own reused curl
 * handle and connection, kept open (HTTP/1.1: each connection is one thread's,
 * so HTTP/2's multiplexing would buy nothing, and its session state cost 50 KB
 * per connection, 3.5 MB over 64 workers); DNS and TLS sessions are shared;
 * credentials come from the kube_config under its lock.
 * An optional client-side token bucket (qps/burst) spaces requests as
 * client-go does; it is off by default, as in controller-runtime, leaving the
 * server's API Priority and Fairness to decide. A wait for it ends, and the
 * request answers without being sent, at the caller's deadline (a per-call
 * timeout, a stream's max_time_ms) and when its abort/stop flag is set; a
 * request may skip it (kube_request_opts.unthrottled). */
#ifndef SBX_KUBE_CLIENT_H
#define SBX_KUBE_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "kube/config.h"
#include "kube/errors.h"

/* Zero fields take defaults: no client-side limit, burst 100 (when qps is
 * set), timeout 30000, connect 5000, UA "sandbox-controller/0.1", max_body
 * 16 MiB. A qps of 0 or below leaves the client-side limit off. */
struct kube_client_opts {
	double qps;
	int burst;
	/* Called once per HTTP attempt on the calling thread (NULL = none), after
	 * it ended: method, HTTP status (0 = no answer), seconds from sending to
	 * the end (for streams: to the end of the stream; stream is 1). Must be
	 * thread-safe and must not call into the client. */
	void (*observe)(void *ctx, const char *method, long status, double seconds, int stream);
	void *observe_ctx;
	long timeout_ms;
	long connect_timeout_ms;
	const char *user_agent;
	size_t max_body; /* response body cap (bytes) */
};

struct kube_client;

/* Takes ownership of cfg (also on failure). Thread-safe. Returns a new client
 * (caller frees with kube_client_free), or NULL if curl cannot be initialised.
 * The first call initialises libcurl and, if SIGPIPE is at its default
 * disposition, ignores it (OpenSSL raises it on connections the peer closed,
 * and curl cannot block it for a multi-threaded program). */
struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *opts);
/* Frees the client and its config. No thread may be inside a call on it. */
void kube_client_free(struct kube_client *c);
/* The client's config (borrowed): namespace, server. */
const struct kube_config *kube_client_config(const struct kube_client *c);
/* HTTP requests sent so far (every attempt, including 401 retries). */
unsigned long kube_client_requests(const struct kube_client *c);
/* The longest Retry-After (in ms) any client answered to the calling thread
 * since this thread last called this function (0 when none); the value is
 * cleared. A worker calls it before a reconcile to start clean and after a
 * failed one to delay the retry at least that long. */
long kube_retry_after_take_ms(void);

/* One request. path like "/api/v1/namespaces/ns/pods/name"; query a
 * NULL-terminated array of key,value pairs (keys and values URL-escaped here; a
 * pair whose value is NULL is skipped; query itself may be NULL); body NULL or
 * a JSON/patch text; content_type NULL = "application/json". On 2xx returns
 * KUBE_OK and *out (if out non-NULL) receives the parsed body (caller frees;
 * NULL for an empty body). Otherwise returns the typed error, described in *err
 * (err may be NULL), and *out is set to NULL. On a 401 with refreshable
 * credentials (token file, exec plugin) they are refreshed and the request is
 * retried once. No other retries: backoff is the caller's (work queue's). */
enum kube_err kube_request(struct kube_client *c, const char *method, const char *path,
			   const char *const *query, const char *body, const char *content_type,
			   cJSON **out, struct kube_error *err);

/* Per-call overrides for kube_request_ex. */
struct kube_request_opts {
	/* 0 = the client's, which bounds the transfer alone (as client-go's
	 * rest.Config.Timeout: a throttled client does not fail a request it
	 * never sent). A timeout given here is a deadline for the wait for the
	 * client-side rate limit and the transfer together: a wait that would
	 * reach it is not begun, and TRANSPORT is answered at once, nothing
	 * sent and no token taken. */
	long timeout_ms;
	/* NULL, or a flag that aborts the call when set (-> TRANSPORT), also
	 * while it waits for the client-side rate limit (nothing is sent then) */
	const atomic_int *abort;
	const char *field_selector; /* kube_list_ex only: a fieldSelector for every page (NULL = none) */
	/* 1: not held by the client-side rate limit, nor counted in it. For
	 * the few requests that must never queue behind the workers' (the
	 * lease elector's: a renewal that waited would miss the renew deadline;
	 * controller-runtime gives leader election a client of its own). */
	int unthrottled;
};
/* kube_request with overrides (ro may be NULL). */
enum kube_err kube_request_ex(struct kube_client *c, const char *method, const char *path,
			      const char *const *query, const char *body, const char *content_type,
			      const struct kube_request_opts *ro, cJSON **out,
			      struct kube_error *err);

/* Most JSON values (base/jsoncount.h) a LIST page may hold to be parsed
 * whole. A parse costs about 128 bytes a value (a 64-byte cJSON node, its
 * key and its string, each allocated), so this keeps a page's tree within
 * about 25 MiB of the controller's 256 MiB. The body cap alone does not: a
 * tenant's objects may be mostly tiny values (metadata has no count limit,
 * only the object's size: ten Sandboxes of tens of thousands of labels fill
 * a 16 MiB page whose tree is 150-180 MiB). A page of 100 ordinary pods or
 * Sandboxes (about 4 MiB parsed) holds a fraction of it. */
#define KUBE_LIST_PAGE_MAX_VALUES 200000

/* Paginated LIST (limit 100 + continue). A page over the body cap, or
 * holding more than KUBE_LIST_PAGE_MAX_VALUES values (counted before it is
 * parsed), is asked again with half the items from the same continue token,
 * down to one item (parsed whatever its values: etcd caps an object's size).
 * Calls item_cb for each item (borrowed for the call). On 410 for an expired
 * continue token the list restarts from scratch (up to 3 times), so item_cb
 * may see an item twice; use kube_list_ex to be told. On KUBE_OK, *rv_out (if
 * non-NULL) receives the list's resourceVersion (caller frees); on error it
 * is left NULL. */
enum kube_err kube_list(struct kube_client *c, const char *path, const char *label_selector,
			void (*item_cb)(void *ctx, const cJSON *item), void *ctx, char **rv_out,
			struct kube_error *err);
/* kube_list that calls reset_cb (NULL ok) before a restart, so the caller can
 * drop what it collected, and applies ro (NULL ok) to every page request. */
enum kube_err kube_list_ex(struct kube_client *c, const char *path, const char *label_selector,
			   void (*item_cb)(void *ctx, const cJSON *item),
			   void (*reset_cb)(void *ctx), void *ctx,
			   const struct kube_request_opts *ro, char **rv_out,
			   struct kube_error *err);

/* Receives streamed body bytes; returns non-zero to end the stream. */
typedef int (*kube_data_fn)(void *ctx, const char *data, size_t n);
struct kube_stream_opts {
	long low_speed_time_s; /* drop the stream after this long below 1 byte/s; 0 = never */
	/* hard limit on the whole stream, a wait for the client-side rate
	 * limit included; 0 = none */
	long max_time_ms;
	/* NULL, or a flag checked at least once a second (every 50 ms while
	 * waiting for the client-side rate limit) */
	const atomic_int *stop;
};
/* A streaming GET (watch): the 2xx body is handed to cb as it arrives, over a
 * connection with TCP keepalive. Returns KUBE_OK when the server ended the
 * stream, cb returned non-zero, or *stop was set (also before it was sent:
 * http_status 0); otherwise the typed error
 * (a non-2xx answer is decoded like kube_request's). *err (err may be NULL)
 * is filled in every case, and its http_status is the answer's status, 0
 * when none came: also on KUBE_OK, and on a TRANSPORT error after a 2xx
 * answer (the stream broke), so a caller can tell a stream the server
 * accepted from one it never answered. */
enum kube_err kube_stream(struct kube_client *c, const char *path, const char *const *query,
			  const struct kube_stream_opts *so, kube_data_fn cb, void *ctx,
			  struct kube_error *err);

#endif
