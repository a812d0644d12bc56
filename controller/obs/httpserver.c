/* The bounded HTTP/HTTPS server (see httpserver.h for the bounds).
 *
 * libevent 2.1's evhttp has no connection limit, no whole-request deadline and
 * no hook when a server connection opens or closes, so this file keeps its own
 * per-connection record:
 * - evhttp calls our bufferevent callback (evhttp_set_bevcb) for every
 *   accepted socket: that is where a connection is counted, gets its TLS
 *   session and its deadline, and where accepting pauses at the cap;
 * - evhttp creates the evhttp_connection right after that callback returns,
 *   inside the listener's callback. A priority-0 event ("adopt"), activated by
 *   our callback, runs before any I/O callback of that connection (libevent
 *   runs higher-priority active events first and interrupts a lower-priority
 *   queue to do so) and installs the close callback; evhttp calls it from
 *   evhttp_connection_free, the one place where every server connection ends
 *   (client close, error, evhttp timeout, our deadline, evhttp_free);
 * - a callback on the connection's input buffer notices the first byte of a
 *   request on an idle keep-alive connection (the request deadline starts),
 *   and the request's on-complete callback notices the response is written
 *   (the connection becomes idle and may be shed at the cap).
 * Each loop owns its connections; they are only touched on the loop's thread
 * (or on the stopping thread after the loop was joined). */
#define _GNU_SOURCE
#include "obs/httpserver.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <uthash.h>
#include <utlist.h>

#include "base/xmalloc.h"
#include "obs/log.h"
#include "obs/metrics.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define TLS_CHECK_MS 1000
/* Connections still silent wait in the kernel's half-open queue, as long as
 * this (TCP_DEFER_ACCEPT, see listen_on): 511 let a flood of 1,000 slow
 * clients overflow into SYN cookies, which skip the deferral. */
#define LISTEN_BACKLOG 4096 /* capped by net.core.somaxconn */
/* TLS 1.2 suites offered: ECDHE key exchange with AEAD ciphers only (no CBC,
 * no SHA-1 MACs, no static RSA); TLS 1.3 keeps OpenSSL's suites, all AEAD. */
#define TLS12_CIPHERS                                                                              \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:" \
	"ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

struct conn {
	struct http_thread *t;
	struct bufferevent *bev;
	struct evhttp_connection *evcon; /* NULL until adopted */
	struct event *deadline;
	struct event *kill; /* closes the connection from outside its own callbacks */
	struct evbuffer_cb_entry *incb;
	size_t inflight;    /* bytes of the unanswered request counted in s->inflight */
	int client_checked; /* client_name looked up */
	char client_name[256];
	int waiting;	 /* no request being answered: may be shed at the cap */
	int idle;	 /* keep-alive, no byte of the next request yet */
	int arriving;	 /* a byte of the request being read has come */
	struct job *job; /* its request being answered by a handler thread, or NULL */
	int64_t since;	 /* when it was accepted, went idle, or its request began */
	/* For http_server_request_phase_seconds, in microseconds: when it was
	 * accepted (0 once its first request began), when the request being
	 * read or answered began, and when its answer was queued for writing. */
	int64_t accepted_us, begun_us, replied_us;
	struct conn *prev, *next;  /* t->conns, oldest first */
	struct conn *next_pending; /* t->pending */
	UT_hash_handle hh;	   /* t->byevcon, keyed by evcon */
};

/* A request on its way through a handler: copies of what the handler reads,
 * and its answer. Made and sent on its loop's thread; the handler runs there
 * (handler_threads 0) or on a handler thread, which hands it back through
 * the loop's done list. */
struct job {
	struct http_thread *t;
	struct conn *c;		    /* loop thread only: NULL once the connection closed */
	struct evhttp_request *req; /* valid while c is not NULL */
	const struct route *rt;	    /* NULL: 404 */
	struct obs_http_req r;
	char *path, *query, *body;
	char peer[64], client_name[256];
	struct evkeyvalq headers;
	struct obs_http_resp resp;
	int refused; /* answered 503 without its handler: JOB_STOPPING, JOB_FULL (or 0) */
	/* microseconds: read whole (queued for a handler), taken by one, answered */
	int64_t read_us, taken_us, done_us;
	/* Loop thread only: the bytes of its request, counted in s->inflight,
	 * that it took over from its connection when that closed while a
	 * handler ran it (its copy of the body lives until the handler returns). */
	size_t inflight;
	int queued;		   /* pool_mu: waiting for a handler thread, in s->pool_q */
	struct job *qprev, *qnext; /* s->pool_q (utlist DL), under pool_mu */
	struct job *next;	   /* t->done */
};
#define JOB_STOPPING 1 /* the server stopped before a handler took it */
#define JOB_FULL 2     /* max_queued requests were waiting for a handler already */

struct http_thread {
	struct obs_http_server *s;
	struct event_base *base;
	struct evhttp *http;
	struct evconnlistener *lev; /* owned by http */
	int fd;			    /* listening socket */
	struct event *adopt, *retry, *watch, *reshed, *stop;
	int cap, nconns;
	int paused; /* at the cap */
	/* At the cap with a client queued and no connection to shed: the next
	 * answer tells its client the connection closes (see on_queued). */
	int decline;
	/* When the loop last came back from a handler that held it: time a
	 * client spent waiting for us to read it is not its own. */
	int64_t quiet_from;
	/* Requests the handler threads have answered, for this loop to send. */
	pthread_mutex_t done_mu;
	struct job *done;
	struct event *done_ev;
	int backing_off;
	int backoff_ms;
	int stopping;
	struct conn *conns, *conns_tail, *pending;
	struct conn *byevcon;
	pthread_t tid;
	int started;
};

struct route {
	char *path;
	obs_http_handler fn;
	void *ctx;
};

struct obs_http_server {
	char *name;
	int port;
	int request_timeout_s, idle_timeout_s;
	/* A connection is shed for a queued client only once it has waited this
	 * long in its state (accepted, idle, or a request arriving): a client
	 * reusing a kept-alive connection may have written its request already,
	 * and a request cut mid-way fails where a queued client merely waits. */
	int shed_min_age_ms;
	size_t max_body, max_headers;
	struct route *routes;
	size_t nroutes;
	struct http_thread *threads;
	int nthreads;

	/* Handler threads (handler_threads > 0): a FIFO of at most max_queued
	 * requests, each with its connection open (one closing takes its request
	 * out). The loops and the handler threads hand jobs over only under
	 * pool_mu. */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	struct job *pool_q; /* utlist DL: pool_q->qprev is the tail */
	int pool_stopping, npool, nqueued, max_queued;
	pthread_t *pool;

	/* TLS: the context for new connections, swapped when the files change */
	char *cert_file, *key_file, *client_ca_file;
	char **client_names; /* NULL-terminated, or NULL: any name the CA signed */
	pthread_mutex_t tls_mu;
	SSL_CTX *ssl_ctx;
	struct stat cert_st, key_st, ca_st;

	/* bytes of unanswered requests on every connection (max_inflight 0: no cap) */
	atomic_size_t inflight;
	size_t max_inflight;
	int64_t tls_checked_ms;

	/* obs_http_drain was called: every answer closes its connection */
	atomic_int draining;

	/* a warning at most once a second, with the number left out */
	atomic_llong warn_next_ms;
	atomic_ulong warn_dropped;

	atomic_ulong accepted, deferred, shed, timeouts, accept_errors, tls_reloads, tls_reload_errors, open,
	    overbudget, queue_full;

	/* the same counts in the metrics registry, labelled with the name */
	const char *label[1];
	struct obs_metric *m_accepted, *m_deferred, *m_shed, *m_timeouts, *m_accept_errors, *m_tls_reloads,
	    *m_open, *m_requests, *m_overbudget, *m_queue_full, *m_phase;
};

/* Counts in both the plain counter (obs_http_stats) and the registry. */
static void count(struct obs_http_server *s, atomic_ulong *c, struct obs_metric *m)
{
	atomic_fetch_add(c, 1);
	obs_metric_add(m, s->label, 1);
}

static void register_metrics(struct obs_http_server *s)
{
	s->label[0] = s->name;
	s->m_accepted = obs_counter("http_server_connections_accepted_total", "Connections accepted by a listener.",
				    "listener");
	s->m_deferred = obs_counter("http_server_connection_cap_pauses_total",
				    "Times a listener stopped accepting at its connection cap.", "listener");
	s->m_shed = obs_counter("http_server_connections_shed_total",
				"Connections closed to make room for a queued client at the cap: waiting ones, and ones "
				"whose answer said they close.",
				"listener");
	s->m_timeouts = obs_counter("http_server_deadline_closes_total",
				    "Connections closed by the whole-request or idle keep-alive deadline.", "listener");
	s->m_accept_errors = obs_counter("http_server_accept_errors_total",
					 "accept() failures (EMFILE, ENFILE, ...) that paused a listener.", "listener");
	s->m_tls_reloads = obs_counter("http_server_tls_reloads_total",
				       "Changed certificate pairs loaded (ok) or refused (error).", "listener,result");
	s->m_open = obs_gauge("http_server_open_connections", "Connections open on a listener.", "listener");
	s->m_requests = obs_counter("http_server_requests_total", "Requests answered by a handler, by status code.",
				    "listener,code");
	s->m_overbudget = obs_counter("http_server_inflight_cap_closes_total",
				      "Connections closed because the bytes of unanswered requests passed the cap.",
				      "listener");
	s->m_queue_full = obs_counter("http_server_handler_queue_full_total",
				      "Requests answered 503 because max_queued requests were already waiting for a "
				      "handler thread.",
				      "listener");
	/* Fine below 100 ms, where a webhook call's budget is. */
	static const double phase_buckets[] = { .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };
	s->m_phase = obs_histogram("http_server_request_phase_seconds",
				   "Where a request's time goes, by phase: handshake (accepted, with its first bytes, "
				   "to the first request byte of a new connection: the TLS handshake), read (first byte to the whole "
				   "request), queue (waiting for a handler thread), handle (the handler), reply (handler "
				   "done to the loop sending the answer), write (answer queued to written), total (first "
				   "byte read to answer written).",
				   "listener,phase", phase_buckets, sizeof phase_buckets / sizeof phase_buckets[0]);
}

static __thread struct http_thread *current_thread; /* the loop running on this thread */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One observation of http_server_request_phase_seconds: from from_us to
 * to_us (nothing when from_us is unset). */
static void phase(struct obs_http_server *s, const char *name, int64_t from_us, int64_t to_us)
{
	if (from_us <= 0)
		return;
	const char *lv[] = { s->name, name };
	obs_metric_observe(s->m_phase, lv, (double)(to_us > from_us ? to_us - from_us : 0) / 1e6);
}

/* Logs a warning unless one was logged less than a second ago (then counts it). */
static void warn_limited(atomic_llong *next, atomic_ulong *dropped, const char *msg, const char *k1, const char *v1,
			 const char *k2, const char *v2)
{
	int64_t now = now_ms();
	long long due = atomic_load(next);
	if (now < due || !atomic_compare_exchange_strong(next, &due, now + 1000)) {
		atomic_fetch_add(dropped, 1);
		return;
	}
	char n[32];
	snprintf(n, sizeof n, "%lu", atomic_exchange(dropped, 0));
	log_kv(LOG_WARN, msg, k1, v1, k2, v2, "suppressed", n);
}

static void server_warn(struct obs_http_server *s, const char *msg, const char *detail)
{
	warn_limited(&s->warn_next_ms, &s->warn_dropped, msg, "server", s->name, "error", detail);
}

/* libevent's own warnings ("Error from accept() call", ...) share one limit. */
static atomic_llong libevent_next_ms;
static atomic_ulong libevent_dropped;
static void libevent_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		warn_limited(&libevent_next_ms, &libevent_dropped, "libevent", "detail", msg, NULL, NULL);
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void)
{
	evthread_use_pthreads();
	event_set_log_callback(libevent_log);
}

/* ---- TLS ---- */

static void ssl_error(char *err, size_t errlen, const char *what, const char *path)
{
	char detail[256] = "unknown error";
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, detail, sizeof detail);
	ERR_clear_error();
	snprintf(err, errlen, "%s %s: %s", what, path, detail);
}

/* The certificate's name for handlers into out: the first of its subject
 * common name and its DNS subjectAltNames that is one of names (names NULL:
 * the first of them that is not empty). 1 when one was found. */
static int cert_name(X509 *cert, char *const *names, char *out, size_t n)
{
	char cn[256] = "";
	X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
	GENERAL_NAMES *sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	int found = 0;
	for (int i = -1; !found && i < (sans ? sk_GENERAL_NAME_num(sans) : 0); i++) {
		const unsigned char *d = (const unsigned char *)cn;
		size_t len = strlen(cn);
		if (i >= 0) {
			const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
			if (g->type != GEN_DNS || ASN1_STRING_length(g->d.dNSName) <= 0)
				continue;
			d = ASN1_STRING_get0_data(g->d.dNSName);
			len = (size_t)ASN1_STRING_length(g->d.dNSName);
		}
		if (!len || memchr(d, '\0', len) || len >= n)
			continue;
		for (char *const *w = names; w && *w && !found; w++)
			found = len == strlen(*w) && !memcmp(d, *w, len);
		if (found || !names) {
			memcpy(out, d, len);
			out[len] = '\0';
			found = 1;
		}
	}
	GENERAL_NAMES_free(sans);
	return found;
}

/* OpenSSL's chain verdict, and at the leaf the names the server asks for. */
static int verify_client(int ok, X509_STORE_CTX *x)
{
	if (!ok || X509_STORE_CTX_get_error_depth(x) != 0)
		return ok;
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	const struct obs_http_server *s = ssl ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;
	if (!s || !s->client_names)
		return ok;
	char name[256];
	if (cert_name(X509_STORE_CTX_get_current_cert(x), s->client_names, name, sizeof name))
		return 1;
	X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED);
	return 0;
}

/* A server context for s's files, TLS 1.2 minimum (AEAD suites only), with
 * client certificates required when s has a client CA; NULL with a message. */
static SSL_CTX *tls_ctx_new(struct obs_http_server *s, char *err, size_t errlen)
{
	const char *cert = s->cert_file, *key = s->key_file;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		ssl_error(err, errlen, "TLS context", "");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		ssl_error(err, errlen, "TLS minimum version", "");
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
		ssl_error(err, errlen, "TLS 1.2 cipher list", "");
		goto fail;
	}
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* idle connections hold no buffers */
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		ssl_error(err, errlen, "certificate", cert);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		ssl_error(err, errlen, "private key", key);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_error(err, errlen, "key does not match certificate", cert);
		goto fail;
	}
	if (s->client_ca_file) {
		STACK_OF(X509_NAME) *cas = SSL_load_client_CA_file(s->client_ca_file);
		if (!cas || SSL_CTX_load_verify_locations(ctx, s->client_ca_file, NULL) != 1) {
			sk_X509_NAME_pop_free(cas, X509_NAME_free);
			ssl_error(err, errlen, "client CA file", s->client_ca_file);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, cas); /* takes cas */
		SSL_CTX_set_app_data(ctx, s);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_client);
		SSL_CTX_set_verify_depth(ctx, 4);
		/* A verifying server must name its sessions' context, or OpenSSL
		 * refuses a TLS 1.2 client offering one again. A reload makes a new
		 * context (new ticket keys): no session outlives a CA change. */
		static const unsigned char sid_ctx[] = "sbx-http";
		SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1);
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reloads the pair if either file changed (checked at most once a second);
 * a pair that does not load keeps the previous context. Caller holds tls_mu. */
static void tls_maybe_reload(struct obs_http_server *s)
{
	int64_t now = now_ms();
	if (now - s->tls_checked_ms < TLS_CHECK_MS)
		return;
	s->tls_checked_ms = now;
	struct stat cst, kst, ast = s->ca_st;
	if (stat(s->cert_file, &cst) < 0 || stat(s->key_file, &kst) < 0 ||
	    (s->client_ca_file && stat(s->client_ca_file, &ast) < 0))
		return; /* mid-rotation (or gone): keep serving the pair we have */
	if (same_file(&cst, &s->cert_st) && same_file(&kst, &s->key_st) && same_file(&ast, &s->ca_st))
		return;
	s->cert_st = cst;
	s->key_st = kst;
	s->ca_st = ast;
	char err[512];
	SSL_CTX *ctx = tls_ctx_new(s, err, sizeof err);
	if (!ctx) {
		const char *lv[] = { s->name, "error" };
		atomic_fetch_add(&s->tls_reload_errors, 1);
		obs_metric_add(s->m_tls_reloads, lv, 1);
		log_kv(LOG_ERROR, "changed TLS certificate not loaded; serving the previous one", "server", s->name,
		       "error", err);
		return;
	}
	SSL_CTX_free(s->ssl_ctx); /* sessions already open keep their reference */
	s->ssl_ctx = ctx;
	const char *lv[] = { s->name, "ok" };
	atomic_fetch_add(&s->tls_reloads, 1);
	obs_metric_add(s->m_tls_reloads, lv, 1);
	log_kv(LOG_INFO, "TLS certificate reloaded", "server", s->name, "cert", s->cert_file);
}

static SSL *tls_session_new(struct obs_http_server *s)
{
	pthread_mutex_lock(&s->tls_mu);
	tls_maybe_reload(s);
	SSL *ssl = SSL_new(s->ssl_ctx);
	pthread_mutex_unlock(&s->tls_mu);
	if (!ssl)
		abort(); /* out of memory: the program's one policy */
	return ssl;
}

/* ---- connections ---- */

static void arm(struct conn *c, int seconds)
{
	struct timeval tv = { seconds, 0 };
	evtimer_add(c->deadline, &tv);
}

/* 1 when c must not be shed with shed_min_age_ms: its client is the one the
 * listener serves, a verified client certificate (the API server calling a
 * webhook, which opens no more connections than its own in-flight limits
 * allow and must never see a call it made cut). Others, unauthenticated,
 * are shed as before: slow senders must not hold the cap. */
static int spared(const struct conn *c)
{
	if (!c->t->s->client_ca_file)
		return 0;
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	return ssl && SSL_is_init_finished(ssl) && SSL_get_verify_result(ssl) == X509_V_OK &&
	       SSL_get0_peer_certificate(ssl) != NULL;
}

/* The connection that has waited longest without a request being answered,
 * if it has waited at least min_ms; *wait_ms (when not NULL) is how long
 * until the oldest younger one has, -1 when none waits at all. With min_ms,
 * a wait counts from when the loop was last free to read it at the earliest,
 * and spared connections never qualify. */
static struct conn *oldest_waiting(struct http_thread *t, int64_t min_ms, int64_t *wait_ms)
{
	struct conn *best = NULL;
	for (struct conn *c = t->conns; c; c = c->next)
		if (c->waiting && (!best || c->since < best->since) && (!min_ms || !spared(c)))
			best = c;
	int64_t from = best ? best->since : 0;
	if (min_ms && t->quiet_from > from)
		from = t->quiet_from;
	int64_t age = best ? now_ms() - from : 0;
	if (wait_ms)
		*wait_ms = !best ? -1 : age >= min_ms ? 0
						      : min_ms - age;
	return best && age >= min_ms ? best : NULL;
}

static void pause_accepting(struct http_thread *t)
{
	if (t->paused)
		return;
	t->paused = 1;
	count(t->s, &t->s->deferred, t->s->m_deferred);
	evconnlistener_disable(t->lev);
	/* While paused, the listening socket turning readable means someone is
	 * queued behind the cap: see on_queued. */
	event_add(t->watch, NULL);
}

static void resume_accepting(struct http_thread *t)
{
	if (!t->paused || t->stopping)
		return;
	t->paused = 0;
	t->decline = 0;
	event_del(t->watch);
	if (!t->backing_off)
		evconnlistener_enable(t->lev);
}

static void job_orphan(struct job *j, struct conn *c); /* with the requests, below */

/* evhttp_connection_free is ending the connection: forget it. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
	struct conn *c = arg;
	struct http_thread *t = c->t;
	HASH_DEL(t->byevcon, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		t->conns_tail = c->prev;
	if (c->job)
		job_orphan(c->job, c); /* may take over c->inflight */
	evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->incb);
	event_free(c->deadline);
	event_free(c->kill);
	atomic_fetch_sub(&t->s->inflight, c->inflight);
	free(c);
	t->nconns--;
	atomic_fetch_sub(&t->s->open, 1);
	obs_metric_add(t->s->m_open, t->s->label, -1);
	if (t->nconns < t->cap)
		resume_accepting(t);
}

/* Priority 0: runs before any I/O of the connections just accepted. */
static void on_adopt(evutil_socket_t fd, short what, void *arg)
{
	struct http_thread *t = arg;
	struct conn *c;
	while ((c = t->pending)) {
		t->pending = c->next_pending;
		void *cbarg = NULL;
		bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
		c->evcon = cbarg;
		if (!c->evcon || evhttp_connection_get_bufferevent(c->evcon) != c->bev)
			abort(); /* evhttp's callback argument is its connection, since libevent 2.0 */
		evhttp_connection_set_closecb(c->evcon, on_close, c);
		/* An answer leaves in more than one segment (TLS records, headers
		 * and body): without TCP_NODELAY the last waits for the client's
		 * delayed ACK, 40 ms on Linux, on every request of a kept-alive
		 * connection (the API server's webhook calls). */
		int one = 1;
		evutil_socket_t sfd = bufferevent_getfd(c->bev);
		if (sfd >= 0)
			(void)setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		HASH_ADD_PTR(t->byevcon, evcon, c);
		c->prev = t->conns_tail;
		if (t->conns_tail)
			t->conns_tail->next = c;
		else
			t->conns = c;
		t->conns_tail = c;
	}
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	if (!c->evcon)
		return;
	count(c->t->s, &c->t->s->timeouts, c->t->s->m_timeouts);
	evhttp_connection_free(c->evcon); /* calls on_close */
}

static void on_kill(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	if (c->evcon)
		evhttp_connection_free(c->evcon); /* calls on_close */
}

/* 1 when closing c at the in-flight cap would free its bytes: it is open, not
 * already being closed (its bytes are as good as gone), and no handler thread
 * has its request (whole, it is answered soon, which frees them; one a handler
 * runs would only pass them to its job, see job_orphan). */
static int closable(struct conn *c)
{
	return c->evcon && c->inflight && !c->job && !event_pending(c->kill, EV_TIMEOUT, NULL);
}

/* The total of unanswered bytes passed the cap as bytes arrived on c: closes
 * (after this callback returns) the closable connections of this loop holding
 * the most, biggest first, until the rest fits. Not simply c: a client
 * holding the total just under the cap with a few slow large bodies would
 * then get every small request after it cut (the API server's admission
 * reviews, when it cannot be told apart), while it kept its own. A
 * connection of a verified client (spared) is picked only when no other is
 * left; on equal bytes c goes. Bytes this loop cannot free (jobs whose
 * connection closed while a handler ran them, and other loops' connections,
 * which only their own thread touches) stay counted: when nothing here is
 * left to pick and the total still passes the cap, c is closed, so the
 * bound holds as before. */
static void over_cap(struct conn *c, size_t total)
{
	struct http_thread *t = c->t;
	struct obs_http_server *s = t->s;
	size_t going = 0;
	for (struct conn *o = t->conns; o; o = o->next)
		if (o->evcon && event_pending(o->kill, EV_TIMEOUT, NULL))
			going += o->inflight;
	while (total > going && total - going > s->max_inflight) {
		struct conn *pick = NULL;
		int pick_spared = 0;
		for (struct conn *o = t->conns;; o = o->next) {
			if (!o)
				o = c; /* last, winning ties (it may not be adopted yet) */
			if (closable(o)) {
				int sp = spared(o);
				if (!pick || sp < pick_spared ||
				    (sp == pick_spared &&
				     (o->inflight > pick->inflight || (o == c && o->inflight == pick->inflight)))) {
					pick = o;
					pick_spared = sp;
				}
			}
			if (o == c)
				break;
		}
		if (!pick && !event_pending(c->kill, EV_TIMEOUT, NULL))
			pick = c; /* nothing here frees bytes: the bound must hold */
		if (!pick)
			return;
		count(s, &s->overbudget, s->m_overbudget);
		event_active(pick->kill, EV_TIMEOUT, 1);
		going += pick->inflight;
	}
}

/* Bytes arrived: on an idle keep-alive connection a new request starts. They
 * count against the server's in-flight cap until the request is answered;
 * past it the biggest holders are closed (over_cap). */
static void on_input(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	struct obs_http_server *s = c->t->s;
	if (!info->n_added)
		return;
	if (c->idle) {
		c->idle = 0;
		c->since = now_ms();
		arm(c, s->request_timeout_s);
	} else if (!c->arriving && c->waiting) {
		c->since = now_ms(); /* accepted -> its request arriving */
	}
	if (!c->arriving) {
		c->begun_us = now_us();
		phase(s, "handshake", c->accepted_us, c->begun_us);
		c->accepted_us = 0;
	}
	c->arriving = 1;
	c->inflight += info->n_added;
	size_t total = atomic_fetch_add(&s->inflight, info->n_added) + info->n_added;
	if (s->max_inflight && total > s->max_inflight)
		over_cap(c, total);
}

/* The response is written; the connection waits for the next request. */
static void on_complete(struct evhttp_request *req, void *arg)
{
	struct conn *c = arg;
	int64_t now = now_us();
	phase(c->t->s, "write", c->replied_us, now);
	phase(c->t->s, "total", c->begun_us, now);
	c->replied_us = c->begun_us = 0;
	c->waiting = 1;
	c->idle = 1;
	c->arriving = 0;
	c->since = now_ms();
	atomic_fetch_sub(&c->t->s->inflight, c->inflight);
	c->inflight = 0;
	arm(c, c->t->s->idle_timeout_s);
	if (c->t->paused)
		event_add(c->t->watch, NULL);
}

/* Someone is queued while we are at the cap: make room by closing the
 * connection that has waited longest for a request, once it has waited
 * shed_min_age_ms. With none that old, the next answer sent on this loop
 * carries "Connection: close" and its connection closes once it is written
 * (job_reply), unless its client is spared: clients that keep every
 * connection busy with quick requests, each younger than shed_min_age_ms,
 * would otherwise hold the cap for as long as they liked. That cuts no
 * request and closes no idle connection under a client that may be writing
 * into it: the client reads that it closes before it could reuse it (RFC
 * 9112, section 9.6). */
static void on_queued(evutil_socket_t fd, short what, void *arg)
{
	struct http_thread *t = arg;
	int64_t wait_ms;
	struct conn *c = oldest_waiting(t, t->s->shed_min_age_ms, &wait_ms);
	if (!c || !c->evcon) {
		/* all busy: wait for a close (on_close resumes) or an answer
		 * (on_complete watches again); all young: look again when the
		 * oldest is old enough; either way the next answer makes room */
		t->decline = 1;
		event_del(t->watch);
		if (wait_ms > 0) {
			struct timeval tv = { (time_t)(wait_ms / 1000), (suseconds_t)(wait_ms % 1000) * 1000 };
			evtimer_add(t->reshed, &tv);
		}
		return;
	}
	t->decline = 0;
	count(t->s, &t->s->shed, t->s->m_shed);
	evhttp_connection_free(c->evcon);
}

/* evhttp's bufferevent callback: one per accepted socket. */
static struct bufferevent *on_accept(struct event_base *base, void *arg)
{
	struct http_thread *t = arg;
	struct obs_http_server *s = t->s;
	struct bufferevent *bev;
	if (s->cert_file) {
		bev = bufferevent_openssl_socket_new(base, -1, tls_session_new(s), BUFFEREVENT_SSL_ACCEPTING,
						     BEV_OPT_CLOSE_ON_FREE);
		if (bev)
			bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	} else {
		bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!bev)
		abort(); /* out of memory; and never let evhttp fall back to plain text */
	struct conn *c = xcalloc(1, sizeof *c);
	c->t = t;
	c->bev = bev;
	c->waiting = 1;
	c->since = now_ms();
	c->accepted_us = now_us();
	c->deadline = evtimer_new(base, on_deadline, c);
	c->kill = evtimer_new(base, on_kill, c);
	c->incb = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
	if (!c->deadline || !c->kill || !c->incb || event_priority_set(c->kill, 0) < 0)
		abort();
	arm(c, s->request_timeout_s);
	c->next_pending = t->pending;
	t->pending = c;
	event_active(t->adopt, EV_TIMEOUT, 1);
	t->backoff_ms = 0;
	t->nconns++;
	count(s, &s->accepted, s->m_accepted);
	atomic_fetch_add(&s->open, 1);
	obs_metric_add(s->m_open, s->label, 1);
	if (t->nconns >= t->cap)
		pause_accepting(t); /* the listener checks after each accept */
	return bev;
}

/* accept() failed for a reason other than "try again" (EMFILE, ENFILE,
 * ENOBUFS...): the socket stays readable, so stop watching it for a while
 * instead of spinning (libevent's default logs and retries at once), unless
 * closing a waiting connection of ours frees a descriptor. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	int e = errno;
	struct http_thread *t = current_thread;
	if (!t)
		return;
	count(t->s, &t->s->accept_errors, t->s->m_accept_errors);
	/* out of descriptors is no time to wait: the oldest, however young */
	struct conn *c = e == EMFILE || e == ENFILE ? oldest_waiting(t, 0, NULL) : NULL;
	if (c && c->evcon) {
		/* Our own waiting connections hold the descriptors: free one (its
		 * socket closes before the listener's next turn) and keep accepting.
		 * Each round accepts a connection, so this cannot spin. */
		count(t->s, &t->s->shed, t->s->m_shed);
		evhttp_connection_free(c->evcon);
		server_warn(t->s, "out of descriptors; closed the connection waiting longest", strerror(e));
		return;
	}
	t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (t->backoff_ms > BACKOFF_MAX_MS)
		t->backoff_ms = BACKOFF_MAX_MS;
	t->backing_off = 1;
	evconnlistener_disable(lev);
	struct timeval tv = { t->backoff_ms / 1000, (t->backoff_ms % 1000) * 1000 };
	evtimer_add(t->retry, &tv);
	server_warn(t->s, "accept failed; pausing the listener", strerror(e));
}

/* The oldest waiting connection is old enough to be shed now, if someone is
 * still queued. */
static void on_reshed(evutil_socket_t fd, short what, void *arg)
{
	struct http_thread *t = arg;
	if (t->paused && !t->stopping)
		event_add(t->watch, NULL);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct http_thread *t = arg;
	t->backing_off = 0;
	if (!t->paused && !t->stopping)
		evconnlistener_enable(t->lev);
}

/* ---- requests ---- */

static const char *method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_POST: return "POST";
	default: return "OTHER";
	}
}

const char *obs_http_req_header(const struct obs_http_req *r, const char *name)
{
	return r->headers ? evhttp_find_header(r->headers, name) : NULL;
}

static void job_free(struct job *j)
{
	evhttp_clear_headers(&j->headers);
	buf_release(&j->resp.body);
	free(j->path);
	free(j->query);
	free(j->body);
	free(j);
}

/* c is closing with j still with the handler threads (loop thread). A job
 * still queued is taken out and freed, never decided: its caller has gone,
 * and deciding it would keep a handler from callers still waiting. One a
 * handler has taken keeps its copy of the body until on_done frees it, so it
 * takes over c's bytes in the in-flight cap until then. Its answer is
 * dropped either way: evhttp frees the request with the connection. */
static void job_orphan(struct job *j, struct conn *c)
{
	struct obs_http_server *s = c->t->s;
	pthread_mutex_lock(&s->pool_mu);
	int queued = j->queued;
	if (queued) {
		DL_DELETE2(s->pool_q, j, qprev, qnext);
		j->queued = 0;
		s->nqueued--;
	}
	pthread_mutex_unlock(&s->pool_mu);
	c->job = NULL;
	if (queued) {
		job_free(j);
		return;
	}
	j->c = NULL;
	j->inflight = c->inflight;
	c->inflight = 0;
}

/* Runs the job's handler (or its 404, or its 503) on the calling thread. */
static void job_run(struct job *j)
{
	if (j->refused) {
		j->resp.status = 503;
		j->resp.retry_after_s = 1;
		buf_appends(&j->resp.body, j->refused == JOB_STOPPING ? "shutting down\n" : "too many requests waiting\n");
	} else if (j->rt) {
		j->rt->fn(j->rt->ctx, &j->r, &j->resp);
	} else {
		j->resp.status = 404;
		buf_appends(&j->resp.body, "not found\n");
	}
}

/* Req's answer closes its connection. libevent adds "Connection:
 * keep-alive" to an HTTP/1.0 answer whose request asked for it, beside this
 * "close": the request's wish is taken out once its answer is decided. */
static void say_close(struct evhttp_request *req)
{
	evhttp_remove_header(evhttp_request_get_input_headers(req), "Connection");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
}

/* Sends the job's answer (loop thread; its connection, c when known, still
 * open). */
static void job_reply(struct job *j, struct conn *c)
{
	struct obs_http_server *s = j->t->s;
	struct evhttp_request *req = j->req;
	struct obs_http_resp *resp = &j->resp;
	if (resp->status < 100 || resp->status > 599)
		resp->status = 500;
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	evhttp_add_header(oh, "Content-Type", resp->content_type ? resp->content_type : "text/plain");
	evhttp_add_header(oh, "X-Content-Type-Options", "nosniff");
	if (resp->retry_after_s > 0) {
		char ra[16];
		snprintf(ra, sizeof ra, "%d", resp->retry_after_s);
		evhttp_add_header(oh, "Retry-After", ra);
	}
	const char *conn_hdr = evhttp_find_header(evhttp_request_get_input_headers(req), "Connection");
	if (atomic_load(&s->draining)) {
		/* the process is on its way out (obs_http_drain): every client,
		 * a verified one too, reconnects elsewhere rather than reusing a
		 * connection the listener will close under its next request */
		say_close(req);
	} else if (c && j->t->decline && j->t->paused && !(conn_hdr && !evutil_ascii_strcasecmp(conn_hdr, "close")) &&
		   !spared(c)) {
		/* a client is queued at the cap (on_queued); one asking to close
		 * makes room already, and a verified client (spared) keeps its
		 * connections: queued clients must not make the API server
		 * reconnect behind them */
		j->t->decline = 0;
		say_close(req);
		count(s, &s->shed, s->m_shed);
	}
	if (resp->body.len)
		evbuffer_add(evhttp_request_get_output_buffer(req), resp->body.data, resp->body.len);
	char code[8];
	snprintf(code, sizeof code, "%d", resp->status);
	const char *lv[] = { s->name, code };
	obs_metric_add(s->m_requests, lv, 1);
	if (c)
		c->replied_us = now_us();
	evhttp_send_reply(req, resp->status, NULL, NULL);
}

/* The handler threads' answers: sent on their connections, or dropped
 * where the connection closed meanwhile (loop thread). */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
	struct http_thread *t = arg;
	pthread_mutex_lock(&t->done_mu);
	struct job *list = t->done;
	t->done = NULL;
	pthread_mutex_unlock(&t->done_mu);
	while (list) {
		struct job *j = list;
		list = j->next;
		if (j->c) {
			int64_t now = now_us();
			phase(j->t->s, "queue", j->read_us, j->taken_us);
			phase(j->t->s, "handle", j->taken_us, j->done_us);
			phase(j->t->s, "reply", j->done_us, now);
			j->c->job = NULL;
			job_reply(j, j->c);
		}
		atomic_fetch_sub(&t->s->inflight, j->inflight); /* its connection's, had it closed */
		job_free(j);
	}
}

static void *pool_main(void *arg)
{
	struct obs_http_server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->pool_mu);
		while (!s->pool_q && !s->pool_stopping)
			pthread_cond_wait(&s->pool_cv, &s->pool_mu);
		/* Every queued job's connection is open: one closing took its
		 * job out (job_orphan). */
		struct job *j = s->pool_q;
		if (!j) {
			pthread_mutex_unlock(&s->pool_mu);
			return NULL;
		}
		DL_DELETE2(s->pool_q, j, qprev, qnext);
		j->queued = 0;
		s->nqueued--;
		j->refused = s->pool_stopping ? JOB_STOPPING : 0;
		pthread_mutex_unlock(&s->pool_mu);
		j->taken_us = now_us();
		job_run(j);
		j->done_us = now_us();
		struct http_thread *t = j->t;
		pthread_mutex_lock(&t->done_mu);
		j->next = t->done;
		t->done = j;
		pthread_mutex_unlock(&t->done_mu);
		event_active(t->done_ev, EV_TIMEOUT, 1);
	}
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct http_thread *t = arg;
	struct obs_http_server *s = t->s;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct conn *c = NULL;
	HASH_FIND_PTR(t->byevcon, &evcon, c);
	if (c) {
		c->waiting = 0;
		c->idle = 0;
		arm(c, s->request_timeout_s); /* the answer, too, must not take forever */
		evhttp_request_set_on_complete_cb(req, on_complete, c);
	}
	struct job *j = xcalloc(1, sizeof *j);
	j->t = t;
	j->req = req;
	j->read_us = now_us();
	if (c)
		phase(s, "read", c->begun_us, j->read_us);
	TAILQ_INIT(&j->headers);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL, *query = uri ? evhttp_uri_get_query(uri) : NULL;
	j->path = xstrdup(path && *path ? path : "/");
	j->query = query ? xstrdup(query) : NULL;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t blen = evbuffer_get_length(in); /* at most max_body: evhttp enforces it */
	j->body = xmalloc(blen + 1);
	evbuffer_copyout(in, j->body, blen);
	j->body[blen] = '\0';
	const struct evkeyval *kv;
	TAILQ_FOREACH(kv, evhttp_request_get_input_headers(req), next)
	evhttp_add_header(&j->headers, kv->key, kv->value);
	char *paddr = NULL;
	ev_uint16_t pport = 0;
	if (evcon) {
		evhttp_connection_get_peer(evcon, &paddr, &pport);
		snprintf(j->peer, sizeof j->peer, "%s:%u", paddr ? paddr : "?", pport);
	}
	if (c && !c->client_checked && s->client_ca_file) {
		/* The handshake required and verified it; its name for handlers. */
		c->client_checked = 1;
		SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
		X509 *cert = ssl && SSL_get_verify_result(ssl) == X509_V_OK ? SSL_get1_peer_certificate(ssl) : NULL;
		if (cert && !cert_name(cert, s->client_names, c->client_name, sizeof c->client_name))
			c->client_name[0] = '\0';
		X509_free(cert);
	}
	if (c && c->client_name[0])
		snprintf(j->client_name, sizeof j->client_name, "%s", c->client_name);
	j->r = (struct obs_http_req){
		.client_name = j->client_name[0] ? j->client_name : NULL,
		.method = method_name(evhttp_request_get_command(req)),
		.path = j->path,
		.query = j->query,
		.body = j->body,
		.body_len = blen,
		.headers = &j->headers,
		.peer = j->peer,
	};
	j->resp = (struct obs_http_resp){ .status = 200, .content_type = "text/plain; charset=utf-8" };
	buf_init(&j->resp.body, OBS_HTTP_MAX_RESPONSE);
	for (size_t i = 0; i < s->nroutes && !j->rt; i++)
		if (!strcmp(s->routes[i].path, j->path))
			j->rt = &s->routes[i];
	if (s->npool && c && j->rt) {
		/* A handler thread answers; the loop goes on serving. With
		 * max_queued requests waiting already, or the handler threads
		 * stopping (they take no more), it is answered 503 here. */
		pthread_mutex_lock(&s->pool_mu);
		int refused = s->pool_stopping ? JOB_STOPPING : s->nqueued >= s->max_queued ? JOB_FULL
											    : 0;
		if (!refused) {
			j->c = c;
			c->job = j;
			j->queued = 1;
			DL_APPEND2(s->pool_q, j, qprev, qnext);
			s->nqueued++;
			pthread_cond_signal(&s->pool_cv);
		}
		pthread_mutex_unlock(&s->pool_mu);
		if (!refused)
			return; /* j is the handler threads' now */
		j->refused = refused;
		if (refused == JOB_FULL)
			count(s, &s->queue_full, s->m_queue_full);
	}
	int64_t t0 = now_ms();
	j->taken_us = now_us();
	job_run(j);
	if (j->rt && !j->refused)
		phase(s, "handle", j->taken_us, now_us());
	if (j->rt && !j->refused && now_ms() - t0 >= 10)
		t->quiet_from = now_ms();
	job_reply(j, c);
	job_free(j);
}

/* ---- loops ---- */

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	struct http_thread *t = arg;
	event_base_loopbreak(t->base);
}

static void *loop_main(void *arg)
{
	struct http_thread *t = arg;
	current_thread = t;
	event_base_dispatch(t->base);
	current_thread = NULL;
	return NULL;
}

/* Splits "host:port", ":port" or "[v6]:port". */
static int split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon = strrchr(addr, ':');
	if (!colon)
		return -1;
	const char *h = addr;
	size_t hl = (size_t)(colon - addr);
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	size_t pl = strlen(colon + 1);
	if (hl >= hostlen || pl == 0 || pl >= portlen || strspn(colon + 1, "0123456789") != pl)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	memcpy(port, colon + 1, pl + 1);
	return atoi(port) <= 65535 ? 0 : -1;
}

/* A listening socket on sa (port already set), one of the SO_REUSEPORT group.
 * With TCP_DEFER_ACCEPT the kernel hands a connection to accept() only once
 * its first bytes arrived (or defer_s passed), so a client's request is
 * already there when the loop accepts it and is read before anyone is shed.
 * Without it, a client that wrote its request a few milliseconds after
 * connecting (descheduled on a busy node) could be shed unread as the oldest
 * waiting connection while a flood of new ones was accepted behind it. */
static int listen_on(const struct sockaddr *sa, socklen_t salen, int defer_s, char *err, size_t errlen)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof defer_s) < 0 || bind(fd, sa, salen) < 0 ||
	    listen(fd, LISTEN_BACKLOG) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Claims sa's port (0: a free one, written back into sa) with a socket that
 * does not ask for SO_REUSEPORT, so a port any listener holds is refused: the
 * group alone would join a group of ours on the same port (another server of
 * this process, or a second controller run by the same user) and split the
 * connections between them. The claim is released for the group to bind. */
static int claim_port(struct sockaddr *sa, socklen_t salen, char *err, size_t errlen)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int one = 1, rc = 0;
	socklen_t bl = salen;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 || bind(fd, sa, salen) < 0 ||
	    getsockname(fd, sa, &bl) < 0) {
		snprintf(err, errlen, "%s", errno == EADDRINUSE ? "the port is in use" : strerror(errno));
		rc = -1;
	}
	close(fd);
	return rc;
}

static int thread_setup(struct obs_http_server *s, struct http_thread *t, int fd, char *err, size_t errlen)
{
	t->s = s;
	t->fd = fd;
	t->base = event_base_new();
	/* Three priorities: 0 for adopting new connections, 1 (the default) for
	 * the connections' I/O and timers, 2 for a client queued at the cap: the
	 * bytes our connections sent while the loop was busy are read before
	 * anyone is picked to make room. */
	if (!t->base || event_base_priority_init(t->base, 3) < 0) {
		snprintf(err, errlen, "cannot create an event loop");
		return -1;
	}
	t->adopt = event_new(t->base, -1, 0, on_adopt, t);
	t->retry = evtimer_new(t->base, on_retry, t);
	t->watch = event_new(t->base, fd, EV_READ | EV_PERSIST, on_queued, t);
	t->reshed = evtimer_new(t->base, on_reshed, t);
	t->stop = event_new(t->base, -1, 0, on_stop, t);
	t->done_ev = event_new(t->base, -1, 0, on_done, t);
	t->http = evhttp_new(t->base);
	if (!t->adopt || !t->retry || !t->watch || !t->reshed || !t->stop || !t->done_ev || !t->http ||
	    event_priority_set(t->adopt, 0) < 0 ||
	    event_priority_set(t->watch, 2) < 0 || event_priority_set(t->reshed, 2) < 0) {
		snprintf(err, errlen, "cannot create the HTTP server");
		return -1;
	}
	evhttp_set_gencb(t->http, on_request, t);
	evhttp_set_bevcb(t->http, on_accept, t);
	evhttp_set_allowed_methods(t->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST);
	evhttp_set_max_headers_size(t->http, (ev_ssize_t)s->max_headers);
	evhttp_set_max_body_size(t->http, (ev_ssize_t)s->max_body);
	/* evhttp's own per-read/write timeout is only a backstop; the deadlines
	 * above are the real bounds. */
	evhttp_set_timeout(t->http, s->request_timeout_s > s->idle_timeout_s ? s->request_timeout_s
									     : s->idle_timeout_s);
	struct evhttp_bound_socket *bs = evhttp_accept_socket_with_handle(t->http, fd);
	if (!bs) {
		snprintf(err, errlen, "cannot accept on the listening socket");
		return -1;
	}
	t->fd = -1; /* the listener owns it now */
	t->lev = evhttp_bound_socket_get_listener(bs);
	evconnlistener_set_error_cb(t->lev, on_accept_error);
	return 0;
}

static void thread_teardown(struct http_thread *t)
{
	t->stopping = 1;
	on_adopt(-1, 0, t); /* so evhttp_free reports every connection to on_close */
	if (t->http)
		evhttp_free(t->http); /* closes the listener and every connection */
	if (t->fd >= 0)
		close(t->fd);
	if (t->adopt)
		event_free(t->adopt);
	if (t->retry)
		event_free(t->retry);
	if (t->watch)
		event_free(t->watch);
	if (t->reshed)
		event_free(t->reshed);
	if (t->stop)
		event_free(t->stop);
	on_done(-1, 0, t); /* answers never sent: their connections are gone (on_close) */
	if (t->done_ev)
		event_free(t->done_ev);
	if (t->base)
		event_base_free(t->base);
	pthread_mutex_destroy(&t->done_mu);
}

struct obs_http_server *obs_http_start(const struct obs_http_opts *o, char *err, size_t errlen)
{
	pthread_once(&global_once, global_init);
	char host[256], port[8];
	if (!o->addr || split_addr(o->addr, host, sizeof host, port, sizeof port) < 0) {
		snprintf(err, errlen, "bind address %s must be host:port, :port or [v6]:port", o->addr ? o->addr : "");
		return NULL;
	}
	if (!o->tls_cert_file != !o->tls_key_file) {
		snprintf(err, errlen, "TLS needs both a certificate and a key file");
		return NULL;
	}
	struct obs_http_server *s = xcalloc(1, sizeof *s);
	s->name = xstrdup(o->name ? o->name : "http");
	register_metrics(s);
	s->nthreads = o->threads > 0 ? o->threads : 2;
	int maxc = o->max_connections > 0 ? o->max_connections : 64;
	if (maxc < s->nthreads)
		s->nthreads = maxc;
	s->request_timeout_s = o->request_timeout_s > 0 ? o->request_timeout_s : 10;
	s->idle_timeout_s = o->idle_timeout_s > 0 ? o->idle_timeout_s : 30;
	s->shed_min_age_ms = o->shed_min_age_ms > 0 ? o->shed_min_age_ms : 0;
	s->max_body = o->max_body ? o->max_body : 64 << 10;
	s->max_headers = o->max_headers ? o->max_headers : 16 << 10;
	s->max_inflight = o->max_inflight_bytes;
	s->max_queued = o->max_queued > 0 ? o->max_queued : maxc;
	s->nroutes = o->nroutes;
	s->routes = xcalloc(o->nroutes ? o->nroutes : 1, sizeof *s->routes);
	for (size_t i = 0; i < o->nroutes; i++)
		s->routes[i] = (struct route){ xstrdup(o->routes[i].path), o->routes[i].fn, o->routes[i].ctx };
	pthread_mutex_init(&s->tls_mu, NULL);
	s->threads = xcalloc((size_t)s->nthreads, sizeof *s->threads);
	for (int i = 0; i < s->nthreads; i++) {
		s->threads[i].fd = -1;
		s->threads[i].cap = maxc / s->nthreads + (i < maxc % s->nthreads);
		pthread_mutex_init(&s->threads[i].done_mu, NULL);
	}
	pthread_mutex_init(&s->pool_mu, NULL);
	pthread_cond_init(&s->pool_cv, NULL);
	if (o->tls_client_ca_file && !o->tls_cert_file) {
		snprintf(err, errlen, "client certificates need TLS (a certificate and a key)");
		goto fail;
	}
	if (o->tls_cert_file) {
		s->cert_file = xstrdup(o->tls_cert_file);
		s->key_file = xstrdup(o->tls_key_file);
		if (o->tls_client_ca_file)
			s->client_ca_file = xstrdup(o->tls_client_ca_file);
		size_t nn = 0;
		while (o->tls_client_names && o->tls_client_names[nn])
			nn++;
		if (nn) {
			s->client_names = xcalloc(nn + 1, sizeof *s->client_names);
			for (size_t i = 0; i < nn; i++)
				s->client_names[i] = xstrdup(o->tls_client_names[i]);
		}
		if (stat(s->cert_file, &s->cert_st) < 0 || stat(s->key_file, &s->key_st) < 0 ||
		    (s->client_ca_file && stat(s->client_ca_file, &s->ca_st) < 0)) {
			snprintf(err, errlen, "TLS files %s, %s%s%s: %s", s->cert_file, s->key_file,
				 s->client_ca_file ? ", " : "", s->client_ca_file ? s->client_ca_file : "",
				 strerror(errno));
			goto fail;
		}
		s->tls_checked_ms = now_ms();
		if (!(s->ssl_ctx = tls_ctx_new(s, err, errlen)))
			goto fail;
	}

	struct addrinfo hints = { .ai_family = host[0] ? AF_UNSPEC : AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV },
			*ai = NULL;
	int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
	if (gai != 0) {
		snprintf(err, errlen, "bind address %s: %s", o->addr, gai_strerror(gai));
		goto fail;
	}
	struct sockaddr_storage ss;
	socklen_t sl = (socklen_t)ai->ai_addrlen;
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	char lerr[256];
	if (claim_port((struct sockaddr *)&ss, sl, lerr, sizeof lerr) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", o->addr, lerr);
		goto fail;
	}
	s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	for (int i = 0; i < s->nthreads; i++) {
		int fd = listen_on((struct sockaddr *)&ss, sl, s->request_timeout_s, lerr, sizeof lerr);
		if (fd < 0) {
			snprintf(err, errlen, "cannot listen on %s: %s", o->addr, lerr);
			goto fail;
		}
		if (thread_setup(s, &s->threads[i], fd, err, errlen) < 0)
			goto fail; /* the teardown closes fd */
	}
	if (o->handler_threads > 0) {
		s->pool = xcalloc((size_t)o->handler_threads, sizeof *s->pool);
		for (; s->npool < o->handler_threads; s->npool++) {
			if (pthread_create(&s->pool[s->npool], NULL, pool_main, s) != 0) {
				snprintf(err, errlen, "cannot start the HTTP handler threads");
				goto fail;
			}
		}
	}
	for (int i = 0; i < s->nthreads; i++) {
		if (pthread_create(&s->threads[i].tid, NULL, loop_main, &s->threads[i]) != 0) {
			snprintf(err, errlen, "cannot start the HTTP server threads");
			goto fail;
		}
		s->threads[i].started = 1;
	}
	return s;
fail:
	obs_http_free(s);
	return NULL;
}

int obs_http_port(const struct obs_http_server *s)
{
	return s->port;
}

void obs_http_drain(struct obs_http_server *s)
{
	atomic_store(&s->draining, 1);
}

void obs_http_stats(const struct obs_http_server *s, struct obs_http_stats *out)
{
	struct obs_http_server *m = (struct obs_http_server *)s; /* atomics are read-only here */
	*out = (struct obs_http_stats){
		.accepted = atomic_load(&m->accepted),
		.deferred = atomic_load(&m->deferred),
		.shed = atomic_load(&m->shed),
		.timeouts = atomic_load(&m->timeouts),
		.accept_errors = atomic_load(&m->accept_errors),
		.tls_reloads = atomic_load(&m->tls_reloads),
		.tls_reload_errors = atomic_load(&m->tls_reload_errors),
		.open = atomic_load(&m->open),
		.overbudget = atomic_load(&m->overbudget),
		.queue_full = atomic_load(&m->queue_full),
	};
}

void obs_http_free(struct obs_http_server *s)
{
	if (!s)
		return;
	/* The handler threads first: what they run is answered (the loops still
	 * run), what they had not taken yet, or the loops hand over after, gets
	 * 503 with Retry-After; no handler runs after. */
	pthread_mutex_lock(&s->pool_mu);
	s->pool_stopping = 1;
	pthread_cond_broadcast(&s->pool_cv);
	pthread_mutex_unlock(&s->pool_mu);
	for (int i = 0; i < s->npool; i++)
		pthread_join(s->pool[i], NULL);
	free(s->pool);
	/* event_active persists until the loop runs it, even if the loop has not
	 * started yet (event_base_loopbreak would be forgotten then). */
	for (int i = 0; i < s->nthreads; i++)
		if (s->threads[i].started)
			event_active(s->threads[i].stop, EV_TIMEOUT, 1);
	for (int i = 0; i < s->nthreads; i++)
		if (s->threads[i].started)
			pthread_join(s->threads[i].tid, NULL);
	for (int i = 0; i < s->nthreads; i++)
		thread_teardown(&s->threads[i]);
	free(s->threads);
	for (size_t i = 0; i < s->nroutes; i++)
		free(s->routes[i].path);
	free(s->routes);
	SSL_CTX_free(s->ssl_ctx);
	pthread_mutex_destroy(&s->tls_mu);
	free(s->cert_file);
	free(s->key_file);
	free(s->client_ca_file);
	for (size_t i = 0; s->client_names && s->client_names[i]; i++)
		free(s->client_names[i]);
	free(s->client_names);
	pthread_cond_destroy(&s->pool_cv);
	pthread_mutex_destroy(&s->pool_mu);
	free(s->name);
	free(s);
}
