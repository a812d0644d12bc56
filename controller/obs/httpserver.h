/* A bounded HTTP/HTTPS server for the controller's listeners (metrics, probes,
 * admission webhook), built on libevent's evhttp and OpenSSL bufferevents.
 *
 * Bounds, each one a defence against a slow or hostile client:
 * - `threads` event loops share the port (one SO_REUSEPORT socket each), so a
 *   slow handler holds up only its own loop;
 * - a connection is accepted only once its first bytes arrived (or
 *   request_timeout_s passed: TCP_DEFER_ACCEPT), so a client that connects
 *   and sends nothing costs no slot, and a request is read as soon as its
 *   connection is accepted, before any connection is shed for a queued one.
 *   Those silent connections wait in the kernel's queue of half-open ones,
 *   as long as the listen backlog (4096, capped by net.core.somaxconn): past
 *   it the kernel answers with SYN cookies, and a cookie's connection is
 *   accepted without waiting for its bytes;
 * - at most max_connections open connections (split across the loops). At the
 *   cap a loop stops accepting; if someone is queued behind the cap, the
 *   connection that has waited longest without delivering a complete request
 *   (a slow sender, an idle keep-alive) is closed to make room, so a pile of
 *   slow clients can never lock a quick client (a kubelet probe) out. With
 *   shed_min_age_ms, only once it has been that long in its state (accepted,
 *   idle, or its request arriving), counted from when the loop was last free
 *   to read it (a handler that held the loop does not age anyone), and never
 *   a connection whose client presented a certificate the client CA verified
 *   (the API server calling a webhook: it opens no more connections than its
 *   own in-flight limits, and a call it made must never be cut); a request a
 *   known client has just written on a kept-alive connection is then not
 *   cut, and the queued client waits instead. Bytes that arrived while the
 *   loop was busy are read before a queued client is looked at. Busy
 *   connections (a request being answered) are never closed for this. With
 *   none to close, the next answer the loop sends to a client that is not
 *   spared so says "Connection: close" and its connection closes once it is
 *   written (a verified client keeps its connections), making room without
 *   cutting a request or closing an idle connection its client may be
 *   writing into: clients that keep every connection busy with quick
 *   requests, each younger than shed_min_age_ms, cannot hold the cap;
 * - a whole-request deadline: request_timeout_s from the connection's first
 *   byte (TLS handshake included) or from the first byte of a later request on
 *   a keep-alive connection until the request is complete, however slowly the
 *   bytes trickle in; idle_timeout_s for an idle keep-alive connection;
 * - header and body size caps (413 for a body past its cap; 400 for headers
 *   past theirs, libevent 2.1's answer, and for a malformed request);
 * - accept errors (EMFILE, ENFILE, ...) pause accepting with a backoff of
 *   100 ms doubling to 2 s, logged at most once per second; out of
 *   descriptors with waiting connections open, the one waiting longest is
 *   closed instead, so a quick client still gets in.
 * - request bytes in flight: with max_inflight_bytes, the bytes received for
 *   requests not yet answered, summed over every connection of the server,
 *   stay under that cap (a body is buffered whole before its handler runs,
 *   so this is what bounds the memory of many large bodies at once). When
 *   bytes arriving pass it, the loop they arrived on closes its connection
 *   holding the most unanswered bytes (the one they arrived on on a tie),
 *   and the next biggest while the rest still passes the cap: a client that
 *   holds the total just under the cap with slow large bodies loses those,
 *   never a small request arriving after it. A connection whose client
 *   presented a certificate the client CA verified goes only when no other
 *   is left; one whose request a handler thread has is passed over (it is
 *   answered soon; closing it would free nothing while a handler runs it).
 *   A request a handler thread is deciding holds its copy of the body until
 *   the handler returns: its bytes stay counted until then, even once its
 *   connection has closed, and nothing can free them sooner; neither can a
 *   loop close another loop's connections. When nothing else is left to
 *   close, the connection the bytes arrived on is;
 * - requests waiting for a handler thread (handler_threads > 0): at most
 *   max_queued, the whole server (a connection has one request at a time,
 *   so the default, max_connections, never refuses); past it a request is
 *   answered 503 with Retry-After: 1 at once. A waiting request whose
 *   connection closes (its deadline, its client) is dropped then, never
 *   decided: the handlers' time goes to callers still waiting.
 * With a certificate and key, the listener speaks TLS 1.2+ only, and TLS 1.2
 * only with ECDHE key exchange and AEAD ciphers (AES-GCM, ChaCha20-Poly1305;
 * TLS 1.3 suites are all AEAD); both files are checked for changes (at most
 * once a second, on accept) and a changed, valid pair serves every new
 * connection without a restart; a broken pair is logged and the previous one
 * kept. With a client CA file, the handshake requires a client certificate
 * that CA signed (and, with client names, whose subject common name or a DNS
 * subjectAltName is one of them): any other client gets no HTTP at all. The
 * CA file is re-read with the pair.
 *
 * Where a request's time goes: http_server_request_phase_seconds{listener,
 * phase} (7 phases a listener): handshake (a new connection, accepted to its
 * first request byte: the TLS handshake, on a TLS listener), read (first byte
 * to the whole request), queue (waiting for a handler thread; with handler
 * threads only), handle (the handler), reply (handler done to its loop
 * sending the answer; handler threads only), write (answer queued to
 * written into the socket), total (first byte read to answer written). Time
 * before the first byte is read (the client's, the kernel's, a busy loop's)
 * is in none of them. */
#ifndef SBX_OBS_HTTPSERVER_H
#define SBX_OBS_HTTPSERVER_H

#include <stddef.h>

#include "base/buf.h"

struct evkeyvalq;

/* A request, borrowed for the handler call. path is the URI path without the
 * query; query is NULL when absent; body is NUL-terminated (body_len bytes). */
struct obs_http_req {
	const char *method, *path, *query;
	const char *body;
	size_t body_len;
	const struct evkeyvalq *headers;
	const char *peer; /* client address, for logs */
	/* The verified client certificate's subject common name (the listener
	 * has a client CA: every request has one), or NULL without client
	 * authentication. */
	const char *client_name;
};

/* The value of a request header (case-insensitive name), or NULL; borrowed
 * from req, valid while the handler runs. */
const char *obs_http_req_header(const struct obs_http_req *r, const char *name);

/* Filled by the handler: status (preset 200), content_type (preset
 * "text/plain; charset=utf-8"; must be a static string or outlive the call),
 * the body (preset empty, capped at OBS_HTTP_MAX_RESPONSE bytes) and
 * retry_after_s (preset 0: no Retry-After header). */
struct obs_http_resp {
	int status;
	const char *content_type;
	struct buf body;
	int retry_after_s; /* > 0: a Retry-After header (preset 0) */
};

#define OBS_HTTP_MAX_RESPONSE (64u << 20)

/* Runs on a loop's thread (handler_threads 0: it holds that loop, and every
 * connection of it, while it runs; keep it short) or on a handler thread
 * (handler_threads > 0: it may wait on an API call; the loops go on serving,
 * reading and answering other connections meanwhile). */
typedef void (*obs_http_handler)(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp);

/* Exact path match; any method the server allows (GET, HEAD, POST). */
struct obs_http_route {
	const char *path;
	obs_http_handler fn;
	void *ctx;
};

/* Zero (or NULL) picks the default noted for each field. */
struct obs_http_opts {
	const char *addr;			  /* "host:port", ":port" or "[v6]:port"; port 0 picks one */
	const char *tls_cert_file, *tls_key_file; /* PEM files; both NULL = plain HTTP */
	const char *tls_client_ca_file;		  /* PEM CA(s) client certificates must chain to; NULL = none asked */
	const char *const *tls_client_names;	  /* NULL-terminated names a client certificate must carry; NULL = any */
	int threads;				  /* event loops (default 2) */
	int handler_threads;			  /* handler threads (default 0: handlers run on the loops) */
	int max_connections;			  /* total, split across the loops (default 64) */
	int request_timeout_s;			  /* whole request (default 10) */
	int idle_timeout_s;			  /* idle keep-alive connection (default 30) */
	int shed_min_age_ms;			  /* shed at the cap only after this long in a state (default 0) */
	size_t max_body;			  /* request body cap (default 64 KiB) */
	size_t max_headers;			  /* request line + headers cap (default 16 KiB) */
	size_t max_inflight_bytes;		  /* bytes of unanswered requests, whole server (0 = no cap) */
	int max_queued;				  /* requests waiting for a handler thread (default max_connections) */
	const struct obs_http_route *routes;
	size_t nroutes;
	const char *name; /* for logs (default "http") */
};

struct obs_http_server;

/* Binds, starts the loops and returns the running server (caller frees with
 * obs_http_free), or NULL with a message in err. Everything in o is copied
 * except the routes' ctx pointers, which must stay valid until obs_http_free
 * returns. */
struct obs_http_server *obs_http_start(const struct obs_http_opts *o, char *err, size_t errlen);

/* The port actually bound. */
int obs_http_port(const struct obs_http_server *s);

/* Counters since start (thread-safe reads). */
struct obs_http_stats {
	unsigned long accepted;	     /* connections accepted */
	unsigned long deferred;	     /* times accepting paused at the connection cap */
	unsigned long shed;	     /* connections closed to make room at the cap (waiting, or told on an answer) */
	unsigned long timeouts;	     /* connections cut by the request or idle deadline */
	unsigned long accept_errors; /* accept() failures (EMFILE, ENFILE, ...) */
	unsigned long tls_reloads;   /* certificate pairs (re)loaded after start */
	unsigned long tls_reload_errors;
	unsigned long open;	  /* connections open now */
	unsigned long overbudget; /* connections closed at the in-flight byte cap */
	unsigned long queue_full; /* requests answered 503: max_queued were waiting for a handler */
};
void obs_http_stats(const struct obs_http_server *s, struct obs_http_stats *out);

/* Draining (the process is on its way out): from now on every answer says
 * "Connection: close" and its connection closes once it is written, so a
 * client kept alive reconnects (to another replica) rather than reusing a
 * connection the listener will close under it. Requests are still answered
 * as before. Thread-safe; there is no way back. */
void obs_http_drain(struct obs_http_server *s);

/* Stops accepting, closes every connection, stops and joins the loops: after
 * it returns no handler runs and nothing from the routes is used. Requests no
 * handler thread had taken are answered 503 (Retry-After: 1) where the loops
 * still can. NULL is a no-op. */
void obs_http_free(struct obs_http_server *s);

#endif
