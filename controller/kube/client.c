#include "kube/client.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/jsoncount.h"
#include "base/xmalloc.h"
#include "base/ktime.h"
#include "kube/ratelimit.h"
#include "obs/log.h"

#define DEF_BURST 100
#define DEF_TIMEOUT_MS 30000L
#define DEF_CONNECT_MS 5000L
#define DEF_UA "sandbox-controller/" SBX_VERSION " (linux)"
#define DEF_MAX_BODY ((size_t)16 << 20)
#define ERR_BODY_MAX ((size_t)1 << 20) /* body kept to decode a failed stream */
/* Items per LIST page, halved while an answer exceeds the body cap or
 * KUBE_LIST_PAGE_MAX_VALUES. A parsed page is the largest transient of a
 * restart: 100 full pods, about 4 MiB. */
#define LIST_PAGE 100L
#define LIST_RESTARTS 3
/* A wait for the rate limit looks at its abort/stop flag this often. */
#define RATE_WAIT_SLICE_MS 50

/* One curl handle per calling thread, found by thread id. Handles of threads
 * that have exited stay until the client is freed (a new thread may inherit
 * one whose id was recycled, which is harmless: the old thread is gone). A
 * request made from inside a transfer's callback on the same thread (say, an
 * informer handler called from the watch stream) gets a temporary handle. */
struct handle {
	pthread_t tid;
	CURL *h;
	int busy; /* inside curl_easy_perform */
	struct handle *next;
};

struct kube_client {
	struct kube_config *cfg;
	double qps;
	int burst;
	long timeout_ms;
	long connect_ms;
	size_t max_body;
	char *ua;
	char *base;		    /* URL prefix: the server, or tls-server-name + port */
	struct curl_slist *conn_to; /* CURLOPT_CONNECT_TO when tls-server-name is set */
	struct token_bucket rl;
	pthread_mutex_t mu; /* guards handles */
	struct handle *handles;
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	atomic_ulong requests;
	void (*observe)(void *ctx, const char *method, long status, double seconds, int stream);
	void *observe_ctx;
};

/* The longest Retry-After answered to this thread: see kube_retry_after_take_ms. */
static _Thread_local long retry_after_ms;

/* Monotonic seconds, finer than ktime_mono_ms: local API calls take well
 * under a millisecond. */
static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long kube_retry_after_take_ms(void)
{
	long v = retry_after_ms;
	retry_after_ms = 0;
	return v;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	/* With CURLOPT_NOSIGNAL (required with threads) curl no longer shields the
	 * process from the SIGPIPE that OpenSSL raises writing to a connection the
	 * peer closed; a process that left SIGPIPE at its default would die. */
	struct sigaction sa;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		sa.sa_handler = SIG_IGN;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = 0;
		sigaction(SIGPIPE, &sa, NULL);
	}
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *u)
{
	struct kube_client *c = u;
	pthread_mutex_lock(&c->share_mu[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *u)
{
	struct kube_client *c = u;
	pthread_mutex_unlock(&c->share_mu[d]);
}

/* With tls-server-name, requests go to https://<name>:<port> (the name is then
 * both the SNI and the name verified) and CONNECT_TO sends them to the real
 * host. Returns 0, or -1 if the server URL cannot be parsed. */
static int setup_server_name(struct kube_client *c, const char *server, const char *sni)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	int rc = -1;
	if (!u || curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
		goto out;
	char *path = NULL;
	if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		goto out;
	size_t pl = strlen(path);
	while (pl && path[pl - 1] == '/')
		path[--pl] = '\0';
	c->base = xasprintf("https://%s:%s%s", sni, port, path);
	curl_free(path);
	char *map = xasprintf("%s:%s:%s:%s", sni, port, host, port);
	c->conn_to = curl_slist_append(NULL, map);
	free(map);
	rc = c->conn_to ? 0 : -1;
out:
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

/* 1 when TLS sessions may be shared between the client's handles (resumed
 * by a handle other than the one that made them). */
static int kube_client_shares_tls_sessions(void)
{
	/* Before 8.10.0 libcurl handed one OpenSSL SSL_SESSION to every handle
	 * of a share, and OpenSSL changes it during a handshake: threads that
	 * connect at once race on it (curl/curl#14751; ThreadSanitizer showed it
	 * in e2e/test_quota.sh). 8.10.0 keeps a serialized copy instead. */
	return curl_version_info(CURLVERSION_NOW)->version_num >= 0x080a00;
}

struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *opts)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		log_kv(LOG_ERROR, "curl_global_init failed", "error",
		       curl_easy_strerror(curl_init_rc));
		kube_config_free(cfg);
		return NULL;
	}
	struct kube_client_opts o = { 0 };
	if (opts)
		o = *opts;
	struct kube_client *c = xcalloc(1, sizeof *c);
	c->cfg = cfg;
	c->qps = o.qps > 0 ? o.qps : 0; /* token_bucket: rate <= 0 is unlimited */
	c->observe = o.observe;
	c->observe_ctx = o.observe_ctx;
	c->burst = o.burst > 0 ? o.burst : DEF_BURST;
	c->timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : DEF_TIMEOUT_MS;
	c->connect_ms = o.connect_timeout_ms > 0 ? o.connect_timeout_ms : DEF_CONNECT_MS;
	c->max_body = o.max_body ? o.max_body : DEF_MAX_BODY;
	c->ua = xstrdup(o.user_agent ? o.user_agent : DEF_UA);
	token_bucket_init(&c->rl, c->qps, c->burst);
	pthread_mutex_init(&c->mu, NULL);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_mu[i], NULL);
	const char *sni = kube_config_tls_server_name(cfg);
	if (sni && setup_server_name(c, kube_config_server(cfg), sni) < 0) {
		log_kv(LOG_ERROR, "cannot parse the server URL", "server", kube_config_server(cfg));
		kube_client_free(c);
		return NULL;
	}
	if (!c->base)
		c->base = xstrdup(kube_config_server(cfg));
	c->share = curl_share_init();
	if (!c->share ||
	    curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) != CURLSHE_OK ||
	    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
	    (kube_client_shares_tls_sessions() &&
	     curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)) {
		log_kv(LOG_ERROR, "curl_share_init failed");
		kube_client_free(c);
		return NULL;
	}
	return c;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	struct handle *h = c->handles;
	while (h) {
		struct handle *n = h->next;
		curl_easy_cleanup(h->h);
		free(h);
		h = n;
	}
	if (c->share)
		curl_share_cleanup(c->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->share_mu[i]);
	pthread_mutex_destroy(&c->mu);
	token_bucket_release(&c->rl);
	curl_slist_free_all(c->conn_to);
	free(c->base);
	free(c->ua);
	kube_config_free(c->cfg);
	free(c);
}

const struct kube_config *kube_client_config(const struct kube_client *c)
{
	return c->cfg;
}

unsigned long kube_client_requests(const struct kube_client *c)
{
	return atomic_load(&c->requests);
}

/* Returns the calling thread's curl handle, marked busy, creating it on first
 * use; or, when that handle is already busy (a nested call), a temporary one
 * (*slot NULL). Returns NULL if curl cannot allocate a handle. Pair with
 * put_handle. */
static CURL *get_handle(struct kube_client *c, struct handle **slot)
{
	pthread_t self = pthread_self();
	*slot = NULL;
	pthread_mutex_lock(&c->mu);
	for (struct handle *h = c->handles; h; h = h->next) {
		if (pthread_equal(h->tid, self)) {
			if (h->busy)
				break;
			h->busy = 1;
			*slot = h;
			pthread_mutex_unlock(&c->mu);
			return h->h;
		}
	}
	pthread_mutex_unlock(&c->mu);
	CURL *e = curl_easy_init();
	if (!e)
		return NULL;
	pthread_mutex_lock(&c->mu);
	int have = 0;
	for (struct handle *h = c->handles; h; h = h->next)
		have |= pthread_equal(h->tid, self);
	if (!have) {
		struct handle *h = xcalloc(1, sizeof *h);
		h->tid = self;
		h->h = e;
		h->busy = 1;
		h->next = c->handles;
		c->handles = h;
		*slot = h;
	}
	pthread_mutex_unlock(&c->mu);
	return e;
}

static void put_handle(struct kube_client *c, CURL *e, struct handle *slot)
{
	if (!slot) {
		curl_easy_cleanup(e);
		return;
	}
	pthread_mutex_lock(&c->mu);
	slot->busy = 0;
	pthread_mutex_unlock(&c->mu);
}

/* Builds base + path + "?" + escaped query (caller frees); NULL if curl
 * cannot escape. */
static char *build_url(struct kube_client *c, CURL *h, const char *path, const char *const *query)
{
	struct buf b;
	buf_init(&b, (size_t)1 << 20);
	int bad = buf_appends(&b, c->base) < 0 || buf_appends(&b, path) < 0;
	char sep = strchr(path, '?') ? '&' : '?';
	for (const char *const *q = query; q && q[0] && !bad; q += 2) {
		if (!q[1])
			continue;
		char *k = curl_easy_escape(h, q[0], 0);
		char *v = curl_easy_escape(h, q[1], 0);
		bad = !k || !v || buf_appendf(&b, "%c%s=%s", sep, k, v) < 0;
		sep = '&';
		curl_free(k);
		curl_free(v);
	}
	if (bad) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}

/* The state of one transfer, shared with curl's callbacks. */
struct xfer {
	CURL *h;
	struct buf body;
	int too_large;
	kube_data_fn stream_cb; /* non-NULL for streams */
	void *stream_ctx;
	int stream_ended_by_cb;
	int stream_ok; /* 1/0 once the status is known, -1 before */
	const atomic_int *stop;
	int stopped;
	char retry_after[64];
};

static size_t on_write(char *p, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = size * n;
	if (x->stream_cb) {
		if (x->stream_ok < 0) {
			long code = 0;
			if (curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
				code = 0;
			x->stream_ok = code >= 200 && code < 300;
		}
		if (x->stream_ok) {
			if (x->stream_cb(x->stream_ctx, p, len)) {
				x->stream_ended_by_cb = 1;
				return 0;
			}
			return len;
		}
	}
	if (buf_append(&x->body, p, len) < 0) {
		x->too_large = 1;
		return 0;
	}
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	if (len > sizeof name - 1 && !strncasecmp(p, name, sizeof name - 1)) {
		size_t vl = len - (sizeof name - 1);
		if (vl >= sizeof x->retry_after)
			vl = sizeof x->retry_after - 1;
		memcpy(x->retry_after, p + sizeof name - 1, vl);
		x->retry_after[vl] = '\0';
		char *e = x->retry_after + strlen(x->retry_after);
		while (e > x->retry_after && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
			*--e = '\0';
	}
	return len;
}

static int on_progress(void *u, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct xfer *x = u;
	if (x->stop && atomic_load(x->stop)) {
		x->stopped = 1;
		return 1;
	}
	return 0;
}

/* Options for one attempt; the first failing setopt wins. */
struct call {
	const char *method;
	const char *url;
	const char *body;
	const char *content_type;
	long timeout_ms;
	const struct kube_stream_opts *stream;
	size_t max_values; /* a 2xx body with more JSON values is TOO_LARGE, unparsed; 0 = any */
	/* The caller's deadline for the wait for the rate limit and the
	 * transfer together (a per-call timeout, a stream's max_time_ms); -1:
	 * none, the wait is not bounded and timeout_ms is the transfer's. */
	long deadline_ms;
	int unthrottled; /* not held by the client-side rate limit */
};

#define SETOPT(h, opt, val)                                       \
	do {                                                      \
		if (rc == CURLE_OK)                               \
			rc = curl_easy_setopt((h), (opt), (val)); \
	} while (0)

/* Applies every option of the call to h (reset after the previous attempt).
 * Returns the first setopt error, or CURLE_OK. *hdrs receives the header list
 * (caller frees). */
static CURLcode setup(struct kube_client *c, CURL *h, const struct call *k,
		      const struct kube_creds *cr, struct xfer *x, char *errbuf,
		      struct curl_slist **hdrs)
{
	CURLcode rc = CURLE_OK;
	SETOPT(h, CURLOPT_URL, k->url);
	SETOPT(h, CURLOPT_NOSIGNAL, 1L);
	SETOPT(h, CURLOPT_ERRORBUFFER, errbuf);
	SETOPT(h, CURLOPT_SHARE, c->share);
	SETOPT(h, CURLOPT_PROTOCOLS_STR, "http,https");
	SETOPT(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SETOPT(h, CURLOPT_USERAGENT, c->ua);
	SETOPT(h, CURLOPT_UPLOAD_BUFFERSIZE, 16384L); /* the minimum; libcurl's default is 64 KB */
	SETOPT(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_ms);
	SETOPT(h, CURLOPT_TCP_KEEPALIVE, 1L);
	SETOPT(h, CURLOPT_TCP_KEEPIDLE, 30L);
	SETOPT(h, CURLOPT_TCP_KEEPINTVL, 10L);
	SETOPT(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	if (c->conn_to)
		SETOPT(h, CURLOPT_CONNECT_TO, c->conn_to);
	if (kube_config_proxy(c->cfg))
		SETOPT(h, CURLOPT_PROXY, kube_config_proxy(c->cfg));
	size_t ca_len;
	const char *ca = kube_config_ca(c->cfg, &ca_len);
	if (ca) {
		struct curl_blob b = { .data = (void *)ca, .len = ca_len, .flags = CURL_BLOB_COPY };
		SETOPT(h, CURLOPT_CAINFO_BLOB, &b);
	}
	if (kube_config_insecure(c->cfg)) {
		SETOPT(h, CURLOPT_SSL_VERIFYPEER, 0L);
		SETOPT(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (cr->cert && cr->key) {
		struct curl_blob cb = {
			.data = cr->cert, .len = cr->cert_len, .flags = CURL_BLOB_COPY
		};
		struct curl_blob kb = {
			.data = cr->key, .len = cr->key_len, .flags = CURL_BLOB_COPY
		};
		SETOPT(h, CURLOPT_SSLCERT_BLOB, &cb);
		SETOPT(h, CURLOPT_SSLCERTTYPE, "PEM");
		SETOPT(h, CURLOPT_SSLKEY_BLOB, &kb);
		SETOPT(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
	struct curl_slist *l = NULL, *t;
	char *auth = cr->token ? xasprintf("Authorization: Bearer %s", cr->token) : NULL;
	char *ctype = k->body ? xasprintf("Content-Type: %s",
					  k->content_type ? k->content_type : "application/json")
			      : NULL;
	const char *hv[] = { "Accept: application/json", "Expect:", auth, ctype };
	for (size_t i = 0; i < sizeof hv / sizeof hv[0]; i++) {
		if (!hv[i])
			continue;
		t = curl_slist_append(l, hv[i]);
		if (!t) {
			rc = CURLE_OUT_OF_MEMORY;
			break;
		}
		l = t;
	}
	if (auth) {
		memset(auth, 0, strlen(auth));
		free(auth);
	}
	free(ctype);
	*hdrs = l;
	SETOPT(h, CURLOPT_HTTPHEADER, l);
	if (!strcmp(k->method, "GET")) {
		SETOPT(h, CURLOPT_HTTPGET, 1L);
	} else if (!strcmp(k->method, "HEAD")) {
		SETOPT(h, CURLOPT_NOBODY, 1L);
	} else {
		if (strcmp(k->method, "POST"))
			SETOPT(h, CURLOPT_CUSTOMREQUEST, k->method);
		if (k->body || !strcmp(k->method, "POST")) {
			SETOPT(h, CURLOPT_POSTFIELDSIZE_LARGE,
			       (curl_off_t)(k->body ? strlen(k->body) : 0));
			SETOPT(h, CURLOPT_POSTFIELDS, k->body ? k->body : "");
		}
	}
	SETOPT(h, CURLOPT_WRITEFUNCTION, on_write);
	SETOPT(h, CURLOPT_WRITEDATA, x);
	SETOPT(h, CURLOPT_HEADERFUNCTION, on_header);
	SETOPT(h, CURLOPT_HEADERDATA, x);
	if (x->stop) {
		SETOPT(h, CURLOPT_NOPROGRESS, 0L);
		SETOPT(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		SETOPT(h, CURLOPT_XFERINFODATA, x);
	}
	if (k->stream) {
		if (k->stream->low_speed_time_s > 0) {
			SETOPT(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
			SETOPT(h, CURLOPT_LOW_SPEED_TIME, k->stream->low_speed_time_s);
		}
		if (k->stream->max_time_ms > 0)
			SETOPT(h, CURLOPT_TIMEOUT_MS, k->stream->max_time_ms);
	} else {
		SETOPT(h, CURLOPT_TIMEOUT_MS, k->timeout_ms);
	}
	return rc;
}

/* Performs one attempt. Returns the typed outcome; *status receives the HTTP
 * status (0 without an answer) and *out the parsed 2xx body. */
static enum kube_err attempt(struct kube_client *c, CURL *h, const struct call *k,
			     const struct kube_creds *cr, struct xfer *x, long *status, cJSON **out,
			     struct kube_error *err)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	*status = 0;
	CURLcode rc = setup(c, h, k, cr, x, errbuf, &hdrs);
	if (rc != CURLE_OK) {
		curl_easy_reset(h);
		curl_slist_free_all(hdrs);
		kube_error_set(err, KUBE_ERR_TRANSPORT, "curl setup: %s", curl_easy_strerror(rc));
		return KUBE_ERR_TRANSPORT;
	}
	atomic_fetch_add(&c->requests, 1);
	double t0 = mono_s();
	rc = curl_easy_perform(h);
	if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status) != CURLE_OK)
		*status = 0;
	if (c->observe)
		c->observe(c->observe_ctx, k->method, *status, mono_s() - t0,
			   k->stream != NULL);
	/* The handle must not keep pointers into this frame (error buffer, header
	 * list, x) nor copies of the key; its connections survive the reset. */
	curl_easy_reset(h);
	curl_slist_free_all(hdrs);
	if (x->too_large) {
		kube_error_set(err, KUBE_ERR_TOO_LARGE, "%s %s: response body exceeds %zu bytes",
			       k->method, k->url, x->body.cap);
		if (err)
			err->http_status = *status;
		return KUBE_ERR_TOO_LARGE;
	}
	if (k->stream && (x->stream_ended_by_cb || x->stopped))
		return KUBE_OK;
	if (rc != CURLE_OK) {
		if (x->stopped) {
			kube_error_set(err, KUBE_ERR_TRANSPORT, "%s %s: aborted", k->method,
				       k->url);
			return KUBE_ERR_TRANSPORT;
		}
		kube_error_set(err, KUBE_ERR_TRANSPORT, "%s %s: %s", k->method, k->url,
			       errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return KUBE_ERR_TRANSPORT;
	}
	if (*status >= 200 && *status < 300) {
		if (k->stream || !out || x->body.len == 0)
			return KUBE_OK;
		/* Counted before it is parsed: the tree would cost ~128 bytes a
		 * value, whatever the body's bytes. */
		if (k->max_values && json_count_values(x->body.data, x->body.len) > k->max_values) {
			kube_error_set(err, KUBE_ERR_TOO_LARGE, "%s %s: response body holds more than %zu JSON values",
				       k->method, k->url, k->max_values);
			if (err)
				err->http_status = *status;
			return KUBE_ERR_TOO_LARGE;
		}
		*out = cJSON_ParseWithLength(x->body.data, x->body.len);
		if (!*out) {
			kube_error_set(err, KUBE_ERR_DECODE,
				       "%s %s: HTTP %ld with a body that is not JSON", k->method,
				       k->url, *status);
			if (err)
				err->http_status = *status;
			return KUBE_ERR_DECODE;
		}
		return KUBE_OK;
	}
	struct kube_error e;
	kube_error_from_response(*status, x->body.data, x->body.len,
				 x->retry_after[0] ? x->retry_after : NULL, &e);
	if (err)
		*err = e;
	if (e.retry_after_s > 0 && (long)e.retry_after_s * 1000 > retry_after_ms)
		retry_after_ms = (long)e.retry_after_s * 1000;
	return e.code;
}

/* Sleeps ms in slices; returns 1 as soon as *stop (NULL: never) is set,
 * else 0 after the whole wait. */
static int sleep_unless_stopped(int64_t ms, const atomic_int *stop)
{
	int64_t end = ktime_mono_ms() + ms;
	for (int64_t left; (left = end - ktime_mono_ms()) > 0;) {
		if (stop && atomic_load(stop))
			return 1;
		ktime_sleep_ms(left < RATE_WAIT_SLICE_MS ? left : RATE_WAIT_SLICE_MS);
	}
	return 0;
}

/* Waits for the client-side rate limit, as client-go's Wait with a context:
 * at most deadline_ms (-1: as long as it takes) and no longer once *stop
 * (NULL: never) is set. Returns 0 when the request may go (*waited_ms: the
 * milliseconds spent), -1 when the wait would reach the deadline (no token
 * is taken), 1 when stop was set (the reservation is given back). */
static int rate_wait(struct kube_client *c, long deadline_ms, const atomic_int *stop,
		     int64_t *waited_ms)
{
	int64_t t0 = ktime_mono_ms();
	*waited_ms = 0;
	if (stop && atomic_load(stop))
		return 1;
	/* The wait must leave the transfer some of the deadline. */
	int64_t wait = token_bucket_reserve_within(&c->rl, deadline_ms >= 0 ? deadline_ms - 1 : -1);
	if (wait < 0)
		return -1;
	if (sleep_unless_stopped(wait, stop)) {
		token_bucket_cancel(&c->rl, t0 + wait);
		return 1;
	}
	*waited_ms = ktime_mono_ms() - t0;
	return 0;
}

/* The request path shared by kube_request_ex and kube_stream: rate limit
 * (bounded by k->deadline_ms and stop; what is left of the deadline then
 * bounds the transfer), credentials, one attempt, and a second one after a
 * curable 401.
 * *status_out (NULL ok) receives the last attempt's HTTP status (0 without
 * an answer); it is left untouched when no attempt was made. */
static enum kube_err do_call(struct kube_client *c, const char *path, const char *const *query,
			     const struct call *call, kube_data_fn cb, void *cb_ctx, const atomic_int *stop,
			     cJSON **out, long *status_out, struct kube_error *err)
{
	struct call own = *call, *k = &own; /* its timeouts shrink by the wait below */
	if (out)
		*out = NULL;
	struct handle *slot;
	CURL *h = get_handle(c, &slot);
	if (!h) {
		kube_error_set(err, KUBE_ERR_TRANSPORT, "curl_easy_init failed");
		return KUBE_ERR_TRANSPORT;
	}
	char *url = build_url(c, h, path, query);
	if (!url) {
		put_handle(c, h, slot);
		kube_error_set(err, KUBE_ERR_TRANSPORT, "cannot build the URL for %s", path);
		return KUBE_ERR_TRANSPORT;
	}
	k->url = url;
	struct kube_stream_opts so_left;
	if (!k->unthrottled) {
		int64_t waited = 0;
		int w = rate_wait(c, k->deadline_ms, stop, &waited);
		long left = k->deadline_ms - (long)waited;
		if (w == 0 && k->deadline_ms >= 0 && left < 1)
			w = -1; /* the sleep overran the deadline: send nothing */
		if (w != 0) {
			put_handle(c, h, slot);
			enum kube_err r = KUBE_ERR_TRANSPORT;
			if (w > 0 && k->stream)
				r = KUBE_OK; /* a stream ended by *stop, as below */
			else if (w > 0)
				kube_error_set(err, r, "%s %s: aborted", k->method, url);
			else
				kube_error_set(err, r,
					       "%s %s: the client-side rate limit would hold it past its %ld ms deadline",
					       k->method, url, k->deadline_ms);
			free(url);
			return r;
		}
		/* What is left of the deadline is the transfer's. */
		if (k->deadline_ms >= 0 && k->stream) {
			so_left = *k->stream;
			so_left.max_time_ms = left;
			k->stream = &so_left;
		} else if (k->deadline_ms >= 0) {
			k->timeout_ms = left;
		}
	}
	char cerr[512];
	struct kube_creds *cr = kube_config_creds(c->cfg, NULL, cerr, sizeof cerr);
	if (!cr) {
		put_handle(c, h, slot);
		kube_error_set(err, KUBE_ERR_TRANSPORT, "credentials: %s", cerr);
		free(url);
		return KUBE_ERR_TRANSPORT;
	}
	enum kube_err r = KUBE_ERR_OTHER;
	int64_t t0 = ktime_mono_ms();
	long status = 0;
	for (int i = 0; i < 2; i++) {
		struct xfer x = {
			.h = h, .stream_cb = cb, .stream_ctx = cb_ctx, .stream_ok = -1, .stop = stop
		};
		buf_init(&x.body, cb ? ERR_BODY_MAX : c->max_body);
		r = attempt(c, h, k, cr, &x, &status, out, err);
		buf_release(&x.body);
		if (r != KUBE_ERR_UNAUTHORIZED || i > 0 || !kube_config_refreshable(c->cfg))
			break;
		struct kube_creds *fresh = kube_config_creds(c->cfg, cr, cerr, sizeof cerr);
		if (!fresh) {
			log_kv(LOG_WARN, "credential refresh after 401 failed", "error", cerr);
			break;
		}
		int same = fresh == cr;
		kube_creds_put(cr);
		cr = fresh;
		if (same)
			break;
		log_kv(LOG_INFO, "retrying with refreshed credentials after 401", "path", path);
	}
	kube_creds_put(cr);
	put_handle(c, h, slot);
	if (status_out)
		*status_out = status;
	if (r != KUBE_OK) {
		char st[16], ms[24];
		snprintf(st, sizeof st, "%ld", status);
		snprintf(ms, sizeof ms, "%lld", (long long)(ktime_mono_ms() - t0));
		log_kv(LOG_DEBUG, "kube request failed", "method", k->method, "path", path,
		       "status", st, "error", kube_err_str(r), "ms", ms);
	}
	free(url);
	return r;
}

/* kube_request_ex whose 2xx body, when it holds more than max_values JSON
 * values (0: any number), is not parsed but answered KUBE_ERR_TOO_LARGE. */
static enum kube_err request_capped(struct kube_client *c, const char *method, const char *path,
				    const char *const *query, const char *body, const char *content_type,
				    const struct kube_request_opts *ro, size_t max_values, cJSON **out,
				    struct kube_error *err)
{
	struct call k = { .method = method ? method : "GET",
			  .body = body,
			  .content_type = content_type,
			  .timeout_ms = ro && ro->timeout_ms > 0 ? ro->timeout_ms : c->timeout_ms,
			  .max_values = max_values,
			  /* The client's timeout is the transfer's alone, as
			   * client-go's rest.Config.Timeout, which starts after the
			   * throttle: a throttled client does not fail requests it
			   * never sent. A caller's own timeout is a deadline. */
			  .deadline_ms = ro && ro->timeout_ms > 0 ? ro->timeout_ms : -1,
			  .unthrottled = ro && ro->unthrottled };
	return do_call(c, path, query, &k, NULL, NULL, ro ? ro->abort : NULL, out, NULL, err);
}

enum kube_err kube_request_ex(struct kube_client *c, const char *method, const char *path,
			      const char *const *query, const char *body, const char *content_type,
			      const struct kube_request_opts *ro, cJSON **out,
			      struct kube_error *err)
{
	return request_capped(c, method, path, query, body, content_type, ro, 0, out, err);
}

enum kube_err kube_request(struct kube_client *c, const char *method, const char *path,
			   const char *const *query, const char *body, const char *content_type,
			   cJSON **out, struct kube_error *err)
{
	return kube_request_ex(c, method, path, query, body, content_type, NULL, out, err);
}

enum kube_err kube_stream(struct kube_client *c, const char *path, const char *const *query,
			  const struct kube_stream_opts *so, kube_data_fn cb, void *ctx,
			  struct kube_error *err)
{
	struct kube_stream_opts none = { 0 };
	struct call k = { .method = "GET", .stream = so ? so : &none };
	k.deadline_ms = k.stream->max_time_ms > 0 ? k.stream->max_time_ms : -1;
	long status = 0;
	enum kube_err r = do_call(c, path, query, &k, cb, ctx, k.stream->stop, NULL, &status, err);
	if (r == KUBE_OK)
		kube_error_set(err, KUBE_OK, "the stream ended");
	/* Also after a 2xx answer whose stream then broke: the caller tells a
	 * watch the server accepted from one it never answered by this. */
	if (err)
		err->http_status = status;
	return r;
}

enum kube_err kube_list_ex(struct kube_client *c, const char *path, const char *label_selector,
			   void (*item_cb)(void *ctx, const cJSON *item),
			   void (*reset_cb)(void *ctx), void *ctx,
			   const struct kube_request_opts *ro, char **rv_out,
			   struct kube_error *err)
{
	char *cont = NULL, *rv = NULL;
	int restarts = 0;
	long limit = LIST_PAGE;
	enum kube_err r;
	if (rv_out)
		*rv_out = NULL;
	for (;;) {
		char lim[24];
		snprintf(lim, sizeof lim, "%ld", limit);
		const char *q[] = { "limit", lim, "labelSelector", label_selector, "fieldSelector",
				    ro ? ro->field_selector : NULL, "continue", cont, NULL };
		cJSON *page = NULL;
		/* One object is parsed whatever its values: etcd caps its size. */
		r = request_capped(c, "GET", path, q, NULL, NULL, ro,
				   limit > 1 ? KUBE_LIST_PAGE_MAX_VALUES : 0, &page, err);
		if (r == KUBE_ERR_TOO_LARGE && limit > 1) {
			/* Tenant-sized objects (over the body cap), or objects of
			 * tiny values (over the values a page may parse into): the
			 * same page in halves, down to one object per answer (an
			 * object always fits: etcd caps it far below the body cap).
			 * The continue token stays valid. */
			limit /= 2;
			log_kv(LOG_INFO, "LIST page too large, asking for fewer items", "path", path,
			       "limit", lim, "error", err ? err->message : "");
			continue;
		}
		if (r == KUBE_ERR_GONE && cont && restarts < LIST_RESTARTS) {
			/* The continue token expired: the snapshot is gone, start over. */
			restarts++;
			free(cont);
			cont = NULL;
			free(rv);
			rv = NULL;
			if (reset_cb)
				reset_cb(ctx);
			continue;
		}
		if (r != KUBE_OK)
			break;
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items");
		const cJSON *md = cJSON_GetObjectItemCaseSensitive(page, "metadata");
		const cJSON *prv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
		const cJSON *pcont = cJSON_GetObjectItemCaseSensitive(md, "continue");
		if (!cJSON_IsObject(page) ||
		    !(cJSON_IsArray(items) || cJSON_IsNull(items) || !items)) {
			cJSON_Delete(page);
			kube_error_set(err, KUBE_ERR_DECODE, "LIST %s: answer is not a list", path);
			r = KUBE_ERR_DECODE;
			break;
		}
		const cJSON *it;
		cJSON_ArrayForEach(it, items)
		{
			if (item_cb)
				item_cb(ctx, it);
		}
		if (cJSON_IsString(prv)) {
			free(rv);
			rv = xstrdup(prv->valuestring);
		}
		free(cont);
		cont = cJSON_IsString(pcont) && pcont->valuestring[0] ? xstrdup(pcont->valuestring)
								      : NULL;
		cJSON_Delete(page);
		if (!cont)
			break;
	}
	free(cont);
	if (r == KUBE_OK && rv_out)
		*rv_out = rv;
	else
		free(rv);
	return r;
}

enum kube_err kube_list(struct kube_client *c, const char *path, const char *label_selector,
			void (*item_cb)(void *ctx, const cJSON *item), void *ctx, char **rv_out,
			struct kube_error *err)
{
	return kube_list_ex(c, path, label_selector, item_cb, NULL, ctx, NULL, rv_out, err);
}
