/* Unit tests for kube/lease: the take-over decision, and the elector against
 * a scripted fake API server (libevent's evhttp on 127.0.0.1, plain HTTP, on
 * its own thread) that keeps one Lease and can stop answering or hand the
 * Lease to another replica. The server is a trimmed copy of the one in
 * test_kube_client.c, which exposes no header. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <CUnit/CUnit.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>

#include "base/ktime.h"
#include "base/xmalloc.h"
#include "kube/lease.h"
#include "test_suites.h"

void register_kube_lease_tests(void);

static void test_can_take(void)
{
	/* Free, released or ours: take it. */
	CU_ASSERT_EQUAL(lease_can_take(NULL, "me", 0, 15), 1);
	CU_ASSERT_EQUAL(lease_can_take("", "me", 0, 15), 1);
	CU_ASSERT_EQUAL(lease_can_take("me", "me", 0, 15), 1);
	/* Another holder: only after its record stood still for the whole duration,
	 * measured on our clock. */
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 0, 15), 0);
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 14999, 15), 0);
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 15000, 15), 1);
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 1000, 1), 1);
	/* A prefix of our identity is someone else. */
	CU_ASSERT_EQUAL(lease_can_take("me", "me-2", 0, 15), 0);
}

/* ---- a fake API server holding one Lease ---- */

#define MAX_HELD 64
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/ns1/leases/ctl"
#define LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/ns1/leases"

struct fake {
	struct event_base *base;
	struct evhttp *http;
	pthread_t thread;
	int port;
	atomic_int hang;     /* 1: leave every request unanswered */
	atomic_int requests; /* requests received */
	pthread_mutex_t mu;
	cJSON *lease; /* under mu; NULL until created */
	int rv;	      /* under mu: the Lease's resourceVersion */
	/* Requests left open (loop thread only); answered when the server stops,
	 * which also frees those whose client went away. */
	struct evhttp_request *held[MAX_HELD];
	int nheld;
};

static void reply(struct evhttp_request *req, int code, const char *body)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	struct evbuffer *b = evbuffer_new();
	if (body)
		evbuffer_add(b, body, strlen(body));
	evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", b);
	evbuffer_free(b);
}

static void reply_status(struct evhttp_request *req, int code, const char *reason)
{
	char *s = xasprintf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
			    "\"status\":\"Failure\",\"message\":\"%s\",\"reason\":\"%s\","
			    "\"code\":%d}",
			    reason, reason, code);
	reply(req, code, s);
	free(s);
}

/* Stores body as the Lease with the next resourceVersion and answers it
 * (mu held). */
static void store_and_reply(struct fake *f, struct evhttp_request *req, cJSON *body, int code)
{
	cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	if (!cJSON_IsObject(m))
		m = cJSON_AddObjectToObject(body, "metadata");
	char rv[16];
	snprintf(rv, sizeof rv, "%d", ++f->rv);
	cJSON_DeleteItemFromObjectCaseSensitive(m, "resourceVersion");
	cJSON_AddStringToObject(m, "resourceVersion", rv);
	cJSON_Delete(f->lease);
	f->lease = body;
	char *s = cJSON_PrintUnformatted(f->lease);
	reply(req, code, s);
	free(s);
}

static const char *rv_of(const cJSON *o)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(o, "metadata"), "resourceVersion");
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* GET, POST and PUT of the one Lease, with the API server's optimistic
 * concurrency: a PUT whose resourceVersion is stale gets a Conflict. */
static void on_request(struct evhttp_request *req, void *u)
{
	struct fake *f = u;
	atomic_fetch_add(&f->requests, 1);
	if (atomic_load(&f->hang)) {
		if (f->nheld < MAX_HELD)
			f->held[f->nheld++] = req;
		return;
	}
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *text = xmalloc(n + 1);
	evbuffer_copyout(in, text, n);
	text[n] = '\0';
	cJSON *body = cJSON_Parse(text);
	free(text);
	pthread_mutex_lock(&f->mu);
	if (cmd == EVHTTP_REQ_GET && !strcmp(path, LEASE_PATH)) {
		if (f->lease) {
			char *s = cJSON_PrintUnformatted(f->lease);
			reply(req, 200, s);
			free(s);
		} else {
			reply_status(req, 404, "NotFound");
		}
	} else if (cmd == EVHTTP_REQ_POST && !strcmp(path, LEASES_PATH) && body) {
		if (f->lease) {
			reply_status(req, 409, "AlreadyExists");
		} else {
			store_and_reply(f, req, body, 201);
			body = NULL;
		}
	} else if (cmd == EVHTTP_REQ_PUT && !strcmp(path, LEASE_PATH) && body) {
		if (!f->lease) {
			reply_status(req, 404, "NotFound");
		} else if (strcmp(rv_of(body), rv_of(f->lease))) {
			reply_status(req, 409, "Conflict");
		} else {
			store_and_reply(f, req, body, 200);
			body = NULL;
		}
	} else {
		reply_status(req, 400, "BadRequest");
	}
	pthread_mutex_unlock(&f->mu);
	cJSON_Delete(body);
}

static void *fake_main(void *u)
{
	struct fake *f = u;
	event_base_loop(f->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

static struct fake *fake_start(void)
{
	CU_ASSERT_FATAL(evthread_use_pthreads() == 0);
	struct fake *f = xcalloc(1, sizeof *f);
	pthread_mutex_init(&f->mu, NULL);
	f->base = event_base_new();
	f->http = evhttp_new(f->base);
	evhttp_set_allowed_methods(f->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT);
	evhttp_set_gencb(f->http, on_request, f);
	struct evhttp_bound_socket *s = evhttp_bind_socket_with_handle(f->http, "127.0.0.1", 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&sa, &sl);
	f->port = ntohs(sa.sin_port);
	CU_ASSERT_FATAL(pthread_create(&f->thread, NULL, fake_main, f) == 0);
	return f;
}

static void finish_held(evutil_socket_t fd, short what, void *u)
{
	(void)fd;
	(void)what;
	struct fake *f = u;
	for (int i = 0; i < f->nheld; i++)
		evhttp_send_reply(f->held[i], 503, "Stopping", NULL);
	f->nheld = 0;
	event_base_loopbreak(f->base);
}

static void fake_stop(struct fake *f)
{
	event_base_once(f->base, -1, EV_TIMEOUT, finish_held, f, NULL);
	pthread_join(f->thread, NULL);
	evhttp_free(f->http);
	event_base_loop(f->base, EVLOOP_NONBLOCK); /* deferred connection frees */
	event_base_free(f->base);
	cJSON_Delete(f->lease);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* What another replica does on taking over: its name as holder, a fresh
 * renewTime, a new resourceVersion. */
static void fake_give_lease_to(struct fake *f, const char *holder)
{
	pthread_mutex_lock(&f->mu);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->lease);
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(f->lease, "spec");
	char now[21];
	ktime_format_rfc3339(time(NULL), now);
	cJSON_ReplaceItemInObjectCaseSensitive(spec, "holderIdentity", cJSON_CreateString(holder));
	cJSON_ReplaceItemInObjectCaseSensitive(spec, "renewTime", cJSON_CreateString(now));
	cJSON_ReplaceItemInObjectCaseSensitive(spec, "acquireTime", cJSON_CreateString(now));
	char rv[16];
	snprintf(rv, sizeof rv, "%d", ++f->rv);
	cJSON *m = cJSON_GetObjectItemCaseSensitive(f->lease, "metadata");
	cJSON_ReplaceItemInObjectCaseSensitive(m, "resourceVersion", cJSON_CreateString(rv));
	pthread_mutex_unlock(&f->mu);
}

/* The Lease's holder now (caller frees), or NULL. */
static char *fake_holder(struct fake *f)
{
	pthread_mutex_lock(&f->mu);
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(f->lease, "spec"), "holderIdentity");
	char *s = cJSON_IsString(h) ? xstrdup(h->valuestring) : NULL;
	pthread_mutex_unlock(&f->mu);
	return s;
}

/* A client for f with the default 30 s request timeout and opts (NULL: the
 * defaults). */
static struct kube_client *client_with_opts(struct fake *f, const struct kube_client_opts *opts)
{
	char *yaml = xasprintf("clusters:\n- name: fake\n  cluster: {server: 'http://127.0.0.1:%d'}\n"
			       "users:\n- name: u\n  user: {token: t}\n"
			       "contexts:\n- name: x\n  context: {cluster: fake, user: u, namespace: ns1}\n"
			       "current-context: x\n",
			       f->port);
	char err[512];
	struct kube_config *cfg = kube_config_parse(yaml, strlen(yaml), NULL, NULL, err, sizeof err);
	free(yaml);
	if (!cfg)
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	struct kube_client *c = kube_client_new(cfg, opts);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	return c;
}

/* A client for f with the defaults (no client-side rate limit). */
static struct kube_client *client_for(struct fake *f)
{
	return client_with_opts(f, NULL);
}

/* Short timings keep the tests short: duration 6 s, renew deadline 4 s,
 * retry 1 s. */
static const struct lease_opts quick = {
	.ns = "ns1",
	.name = "ctl",
	.identity = "me",
	.lease_duration_s = 6,
	.renew_deadline_s = 4,
	.retry_period_s = 1,
};

/* Waits up to ms for lease_is_leader(e) to become want; returns the ms it
 * took, or -1 when it did not. */
static long long wait_leader(struct lease_elector *e, int want, long long ms)
{
	int64_t t0 = ktime_mono_ms();
	while (lease_is_leader(e) != want) {
		if (ktime_mono_ms() - t0 >= ms)
			return -1;
		ktime_sleep_ms(10);
	}
	return (long long)(ktime_mono_ms() - t0);
}

/* A half-open connection to the API server: once leader, no lease request is
 * ever answered. Leadership must end at the renew deadline (measured from the
 * start of the last successful renewal), not when the client's 30 s timeout
 * finally fails a request, so the old leader stops before a standby may take
 * the Lease (duration 6 s). */
static void test_hung_renewal_steps_down_at_deadline(void)
{
	struct fake *f = fake_start();
	struct kube_client *c = client_for(f);
	struct lease_elector *e = lease_elector_start(c, &quick);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_FATAL(wait_leader(e, 1, 5000) >= 0);
	CU_ASSERT_EQUAL(lease_lost(e), 0);
	int before = atomic_load(&f->requests);
	atomic_store(&f->hang, 1);
	long long took = wait_leader(e, 0, 4000 + 2000);
	printf("\n    hung renewals: leader until %lld ms after the server hung\n", took);
	CU_ASSERT(took >= 0);
	/* Not at the first failed attempt either: the last renewal started at
	 * most a retry period (plus a request) before the hang. */
	CU_ASSERT(took < 0 || took >= 2000);
	CU_ASSERT_EQUAL(lease_lost(e), 1);
	CU_ASSERT(atomic_load(&f->requests) > before); /* a renewal was held */
	int64_t t0 = ktime_mono_ms();
	lease_elector_free(e);
	CU_ASSERT(ktime_mono_ms() - t0 < 2000);
	kube_client_free(c);
	fake_stop(f);
}

/* A standby took the Lease over (our renewals stalled, say, or the clocks
 * disagree): the next read shows another holder with a fresh record, and
 * leadership ends then and there, not at the renew deadline. */
static void test_taken_lease_steps_down_at_once(void)
{
	struct fake *f = fake_start();
	struct kube_client *c = client_for(f);
	struct lease_elector *e = lease_elector_start(c, &quick);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_FATAL(wait_leader(e, 1, 5000) >= 0);
	fake_give_lease_to(f, "other");
	long long took = wait_leader(e, 0, 4000 + 2000);
	printf("\n    taken lease: leader until %lld ms after the take-over\n", took);
	CU_ASSERT(took >= 0);
	CU_ASSERT(took < 1000 + 500); /* one retry period, and some slack */
	CU_ASSERT_EQUAL(lease_lost(e), 1);
	lease_elector_free(e);
	char *holder = fake_holder(f); /* neither renewed over nor released */
	CU_ASSERT_STRING_EQUAL(holder ? holder : "(none)", "other");
	free(holder);
	kube_client_free(c);
	fake_stop(f);
}

/* Stopping while leader over a hung connection: the in-flight renewal is
 * abandoned and the release is bounded by the renew deadline, so shutdown
 * does not wait out the client's 30 s timeout (twice). */
static void test_free_is_bounded_when_hung(void)
{
	struct fake *f = fake_start();
	struct kube_client *c = client_for(f);
	struct lease_elector *e = lease_elector_start(c, &quick);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_FATAL(wait_leader(e, 1, 5000) >= 0);
	atomic_store(&f->hang, 1);
	ktime_sleep_ms(1500); /* a renewal is in flight now */
	int64_t t0 = ktime_mono_ms();
	lease_elector_free(e);
	long long took = (long long)(ktime_mono_ms() - t0);
	printf("\n    hung connection: lease_elector_free took %lld ms\n", took);
	CU_ASSERT(took < 4000 + 2000);
	kube_client_free(c);
	fake_stop(f);
}

/* Workers keeping the client's rate limit busy (test_renewal_not_throttled). */
struct load {
	struct kube_client *c;
	int64_t until_ms;
	atomic_int sent;
};

static void *load_main(void *u)
{
	struct load *l = u;
	while (ktime_mono_ms() < l->until_ms) {
		kube_request(l->c, "GET", "/x", NULL, NULL, NULL, NULL, NULL);
		atomic_fetch_add(&l->sent, 1);
	}
	return NULL;
}

/* main.c's wiring: with --kube-api-qps the elector shares the client, and so
 * its token bucket, with the workers, the informers and the event senders.
 * Under a steady backlog every thread holds a reservation, so a request
 * waits about threads/qps before it is sent (6/2 = 3 s here, 85/5 = 17 s in
 * the controller); a renewal that queued behind them would miss the renew
 * deadline (2 s) and end leadership. The elector's requests never wait
 * behind the workers' rate limit. */
static void test_renewal_not_throttled(void)
{
	struct fake *f = fake_start();
	struct kube_client_opts co = { .qps = 2, .burst = 1 };
	struct kube_client *c = client_with_opts(f, &co);
	const struct lease_opts lo = {
		.ns = "ns1",
		.name = "ctl",
		.identity = "me",
		.lease_duration_s = 3,
		.renew_deadline_s = 2,
		.retry_period_s = 1,
	};
	struct lease_elector *e = lease_elector_start(c, &lo);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_FATAL(wait_leader(e, 1, 5000) >= 0);
	enum { THREADS = 6 };
	struct load l = { .c = c, .until_ms = ktime_mono_ms() + 5000 };
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		CU_ASSERT_FATAL(pthread_create(&t[i], NULL, load_main, &l) == 0);
	int64_t lost_at = -1, t0 = ktime_mono_ms();
	while (ktime_mono_ms() < l.until_ms) {
		if (lost_at < 0 && (!lease_is_leader(e) || lease_lost(e)))
			lost_at = ktime_mono_ms() - t0;
		ktime_sleep_ms(20);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("\n    throttled workers: %d requests in 5 s; leadership lost after %lld ms (-1: kept)\n",
	       atomic_load(&l.sent), (long long)lost_at);
	CU_ASSERT_EQUAL(lost_at, -1);
	CU_ASSERT_EQUAL(lease_lost(e), 0);
	/* The workers were throttled: 2 a second and the burst, give or take
	 * the edges. */
	CU_ASSERT(atomic_load(&l.sent) <= 2 * 5 + 1 + THREADS);
	lease_elector_free(e);
	kube_client_free(c);
	fake_stop(f);
}

void register_kube_lease_tests(void)
{
	SBX_SUITE("kube/lease", { "who may take the lease", test_can_take },
		  { "a hung renewal ends leadership at the renew deadline",
		    test_hung_renewal_steps_down_at_deadline },
		  { "a lease taken by another ends leadership at once",
		    test_taken_lease_steps_down_at_once },
		  { "stopping over a hung connection is bounded", test_free_is_bounded_when_hung },
		  { "renewals never wait behind the workers' rate limit", test_renewal_not_throttled });
}
