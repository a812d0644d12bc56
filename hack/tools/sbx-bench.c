/* sbx-bench: the load generator and meter behind hack/bench*.sh. Not shipped.
 *
 *   sbx-bench controller|baseline|peer|claim --namespace NS [--count N] [--concurrency C]
 *             [--rate R] [--scopes S] [--owners O] [--image IMG] [--timeout SECONDS]
 *             [--wait bound|ready] [--pid PID] [--metrics-url URL] [--start-at UNIX_S]
 *             [--shutdown-time RFC3339 [--shutdown-policy Retain|Delete]] [--pool NAME]
 *             [--prefix P] [--owner NAME]
 *
 * --rate R paces the creates at R Sandboxes/s (Sandbox i is sent no earlier
 * than i/R s after the start: a sustained load, whose latencies count from
 * when each Sandbox was due, so a side that falls behind shows its backlog);
 * without it the C threads create as fast as they can (a burst), and
 * latencies count from sending the POST.
 *
 * --start-at makes the first create wait for that wall-clock time (seconds
 * since the epoch, fractions allowed), so a load can be placed in time against
 * another one, e.g. across an expiry.
 *
 * Every mode runs an informer on its kind in NS, then C threads create the
 * objects bench-00000.. in NS. Sandbox i belongs to scope i % S
 * (idempotencyKey bench-key-<scope>, workspaceOwner owner-<scope % O>), so
 * S < N makes N - S of them adoptions. --prefix P names them P00000.. with
 * keys P-key-<scope> instead (two loads side by side in one namespace), and
 * --owner NAME gives every one that workspace owner. --shutdown-time (and --shutdown-policy)
 * gives every Sandbox that spec.lifecycle.
 *
 *   controller  only POSTs the Sandboxes; the running controller binds them.
 *   baseline    does by itself the writes the controller's path needs per
 *               Sandbox: POST the Sandbox, POST a Pod sbx-<i>, merge-PATCH the
 *               Sandbox's /status with a phase and Bound=True; then, from an
 *               informer on its pods, PATCH Ready=True once the pod is Ready.
 *   peer        another controller's Sandbox (agents.x-k8s.io/v1beta1, the
 *               kubernetes-sigs/agent-sandbox API) with the same pod shape;
 *               only Ready is measured (it has no Bound).
 *   claim       agent-sandbox's SandboxClaim (extensions.agents.x-k8s.io/v1beta1)
 *               on the SandboxWarmPool --pool NAME; only Ready is measured.
 *
 * The run ends when the informer has seen Bound=True (--wait bound) or
 * Ready=True (--wait ready, the default) on every created Sandbox. The
 * Sandboxes bound with status.binding Adopted and Warm are counted.
 * With --pid and --metrics-url (controller mode) the controller's API request
 * counter, CPU time and peak RSS are read as well. Latency percentiles are
 * printed for create (until the POST is answered: the admission chain's
 * cost), bound and ready, and the rate the creates were answered at
 * (create_rate: below --rate, the client fell behind). Results go to stdout as
 * KEY=VALUE lines for the script to format; progress and errors go to stderr.
 * Credentials come from $KUBECONFIG. SBX_BENCH_TRACE=FILE writes each
 * Sandbox's due, answered and Bound times there (write_trace). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "obs/log.h"

#define SANDBOX_API "/apis/sandbox.dev/v1alpha1"
#define PEER_API "/apis/agents.x-k8s.io/v1beta1"
#define CLAIM_API "/apis/extensions.agents.x-k8s.io/v1beta1"
#define REQUESTS_METRIC "rest_client_requests_total"
#define PATCHERS 4 /* baseline threads writing Ready */
#define METRICS_MAX (1 << 20)
#define POST_ATTEMPTS 5

enum mode { MODE_CONTROLLER,
	    MODE_BASELINE,
	    MODE_PEER,
	    MODE_CLAIM };

struct bench_opts {
	enum mode mode;
	const char *ns;
	const char *image;
	long count;
	int concurrency;
	long scopes;
	long owners;
	long timeout_s;
	double rate;		     /* Sandboxes/s, 0 = as fast as possible */
	int wait_ready;		     /* the run ends at Ready (1) or Bound (0) */
	pid_t pid;		     /* controller to meter, or 0 */
	const char *metrics_url;     /* its /metrics, or NULL */
	double start_at;	     /* wall-clock seconds of the first create, or 0 */
	const char *shutdown_time;   /* spec.lifecycle.shutdownTime, or NULL */
	const char *shutdown_policy; /* spec.lifecycle.shutdownPolicy, or NULL */
	const char *pool;	     /* claim: the SandboxWarmPool's name */
	const char *prefix;	     /* object names (default "bench-") */
	const char *owner;	     /* every Sandbox's owner, or NULL: owner-<scope % owners> */
};

/* One run. Times are CLOCK_MONOTONIC milliseconds; 0 means "not yet". */
struct bench {
	struct bench_opts o;
	struct kube_client *kc;
	atomic_long next; /* next Sandbox index to create */
	atomic_long failed;
	pthread_barrier_t go; /* writers and main: the clock starts once all are warm */
	pthread_mutex_t mu;   /* guards everything below */
	pthread_cond_t cv;
	double t0;	/* the start, for the pacing of --rate */
	double *sent;	/* when the POST of Sandbox i was sent */
	double *posted; /* when the POST of Sandbox i returned */
	double *bound;	/* when the informer first saw Bound=True on it */
	double *ready;	/* ... and Ready=True */
	long created, nbound, nready, adopted, warm, done_posting;
	double last_posted, last_bound, last_ready;
	/* baseline: pods found Ready, waiting for their Ready status write */
	long *todo;
	long ntodo;
	char *patched; /* 1 once Sandbox i's Ready write was queued */
	int stopping;
};

/* The API group and version path of the mode's kind. */
static const char *api_of(enum mode m)
{
	return m == MODE_PEER ? PEER_API : m == MODE_CLAIM ? CLAIM_API
							   : SANDBOX_API;
}

/* Writes the path of the mode's collection in NS into buf. */
static void collection_path(const struct bench_opts *o, char *buf, size_t size)
{
	snprintf(buf, size, "%s/namespaces/%s/%s", api_of(o->mode), o->ns,
		 o->mode == MODE_CLAIM ? "sandboxclaims" : "sandboxes");
}

/* 1 when the mode's kind has no Bound condition (only Ready is measured). */
static int ready_only(enum mode m)
{
	return m == MODE_PEER || m == MODE_CLAIM;
}

/* Milliseconds on the monotonic clock. */
static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the controller process: /proc and /metrics ---- */

/* Returns the CPU seconds (user + system) pid has used, or -1. */
static double proc_cpu_s(pid_t pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(line, 1, sizeof line - 1, f);
	fclose(f);
	line[n] = '\0';
	/* The command name may hold spaces: fields are counted after its ')'. */
	char *p = strrchr(line, ')');
	if (!p)
		return -1;
	unsigned long utime = 0, stime = 0;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) !=
	    2)
		return -1;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* Returns pid's peak resident set size (VmHWM) in KiB, or -1. */
static long proc_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* curl write callback into a capped struct buf. */
static size_t metrics_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	return buf_append(ctx, data, size * nmemb) == 0 ? size * nmemb : 0;
}

/* Fetches url into b (emptied first). Returns 0, or -1 with a message on stderr. */
static int metrics_fetch(const char *url, struct buf *b)
{
	buf_reset(b);
	CURL *h = curl_easy_init();
	if (!h)
		return -1;
	long status = 0;
	CURLcode rc = curl_easy_setopt(h, CURLOPT_URL, url);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, metrics_write);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	if (rc == CURLE_OK)
		rc = curl_easy_perform(h);
	if (rc == CURLE_OK && curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
		status = 0;
	curl_easy_cleanup(h);
	if (rc != CURLE_OK || status != 200) {
		fprintf(stderr, "sbx-bench: GET %s: %s (HTTP %ld)\n", url, curl_easy_strerror(rc),
			status);
		return -1;
	}
	return 0;
}

/* Returns the sum of every series of the metric name in a Prometheus text
 * exposition, or -1 when it has none. */
static double metric_sum(const char *text, const char *name)
{
	size_t nl = strlen(name);
	double sum = -1;
	for (const char *line = text; *line;) {
		const char *eol = strchrnul(line, '\n');
		const char *v = NULL;
		if (!strncmp(line, name, nl) && (line[nl] == ' ' || line[nl] == '{')) {
			v = line + nl;
			/* Past the labels (if any) to the value. */
			if (*v == '{')
				v = memchr(v, '}', (size_t)(eol - v));
			char *end;
			double x = v ? strtod(v + 1, &end) : 0;
			if (v && end != v + 1)
				sum = (sum < 0 ? 0 : sum) + x;
		}
		line = *eol ? eol + 1 : eol;
	}
	return sum;
}

/* Reads the controller's request counter: -1 when the metric is absent, -2
 * when /metrics cannot be read. */
static double requests_now(const struct bench *b, struct buf *mb)
{
	if (metrics_fetch(b->o.metrics_url, mb) < 0)
		return -2;
	return metric_sum(mb->data ? mb->data : "", REQUESTS_METRIC);
}

/* ---- the informer side ---- */

/* Keeps what the handlers read: name, namespace, resourceVersion and status. */
static cJSON *trim(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "resourceVersion", NULL };
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	const cJSON *om = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	for (const char *const *f = meta; *f; f++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(om, *f);
		if (v)
			cJSON_AddItemToObject(m, *f, cJSON_Duplicate(v, 1));
	}
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (st)
		cJSON_AddItemToObject(t, "status", cJSON_Duplicate(st, 1));
	return t;
}

static const char *str_of(const cJSON *o, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* 1 when status.conditions holds type=True. */
static int cond_true(const cJSON *status, const char *type)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(status, "conditions"))
	{
		const char *t = str_of(c, "type"), *v = str_of(c, "status");
		if (t && v && !strcmp(t, type) && !strcmp(v, "True"))
			return 1;
	}
	return 0;
}

/* Notes the first time a bench Sandbox of our namespace shows Bound=True. */
static void observe(void *ctx, const cJSON *obj)
{
	struct bench *b = ctx;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const char *ns = str_of(md, "namespace"), *name = str_of(md, "name");
	size_t pl = strlen(b->o.prefix);
	if (!ns || !name || strcmp(ns, b->o.ns) || strncmp(name, b->o.prefix, pl) || !name[pl] ||
	    !strchr("0123456789", name[pl]))
		return;
	char *end;
	long i = strtol(name + pl, &end, 10);
	if (*end || i < 0 || i >= b->o.count)
		return;
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	int is_bound = cond_true(st, "Bound"), is_ready = cond_true(st, "Ready");
	if (!is_bound && !is_ready)
		return;
	double t = now_ms();
	const char *binding = str_of(st, "binding");
	pthread_mutex_lock(&b->mu);
	if (b->bound[i] == 0 && (is_bound || ready_only(b->o.mode))) {
		b->bound[i] = t;
		b->last_bound = t;
		b->nbound++;
		if (binding && !strcmp(binding, "Adopted"))
			b->adopted++;
		if (binding && !strcmp(binding, "Warm"))
			b->warm++;
		pthread_cond_broadcast(&b->cv);
	}
	if (b->ready[i] == 0 && is_ready) {
		b->ready[i] = t;
		b->last_ready = t;
		b->nready++;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
}

/* ---- the baseline's Ready writes ---- */

/* A baseline pod changed: once it is Ready, queue its Sandbox's Ready write. */
static void pod_seen(void *ctx, const cJSON *pod)
{
	struct bench *b = ctx;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const char *name = str_of(md, "name");
	char *end;
	if (!name || strncmp(name, "sbx-", 4))
		return;
	long i = strtol(name + 4, &end, 10);
	if (*end || i < 0 || i >= b->o.count || !cond_true(cJSON_GetObjectItemCaseSensitive(pod, "status"), "Ready"))
		return;
	pthread_mutex_lock(&b->mu);
	if (!b->patched[i]) {
		b->patched[i] = 1;
		b->todo[b->ntodo++] = i;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
}

static void pod_add(void *ctx, const cJSON *obj)
{
	pod_seen(ctx, obj);
}

static void pod_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	(void)old_obj;
	pod_seen(ctx, new_obj);
}

/* Keeps a pod's name and its Ready condition. */
static cJSON *trim_pod(const cJSON *obj)
{
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	const char *name = str_of(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name");
	cJSON_AddStringToObject(m, "name", name ? name : "");
	cJSON *st = cJSON_AddObjectToObject(t, "status");
	cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
	if (cond_true(cJSON_GetObjectItemCaseSensitive(obj, "status"), "Ready")) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "type", "Ready");
		cJSON_AddStringToObject(c, "status", "True");
		cJSON_AddItemToArray(conds, c);
	}
	return t;
}

static void on_add(void *ctx, const cJSON *obj)
{
	observe(ctx, obj);
}

static void on_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	(void)old_obj;
	observe(ctx, new_obj);
}

/* ---- the writers ---- */

/* A request with a few retries for answers that may pass (429, 5xx,
 * transport). A POST retried after a lost answer may meet AlreadyExists; that
 * one counts as done, with *out left NULL. */
static enum kube_err request(struct bench *b, const char *method, const char *path,
			     const char *body, const char *ctype, cJSON **out)
{
	struct kube_error err;
	enum kube_err e = KUBE_ERR_OTHER;
	for (int a = 0; a < POST_ATTEMPTS; a++) {
		if (a)
			usleep(100000u << a);
		e = kube_request(b->kc, method, path, NULL, body, ctype, out, &err);
		if (e == KUBE_ERR_ALREADY_EXISTS && a > 0)
			return KUBE_OK;
		if (!kube_err_retriable(e))
			break;
	}
	if (e != KUBE_OK)
		fprintf(stderr, "sbx-bench: %s %s: %s\n", method, path, err.message);
	return e;
}

#define POD_RESOURCES                                                     \
	"\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}," \
	"\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}}"

/* The Sandbox (or claim) i as JSON (caller frees). */
static char *sandbox_body(const struct bench *b, long i)
{
	long scope = i % b->o.scopes;
	if (b->o.mode == MODE_PEER) /* the same pod shape in agent-sandbox's API */
		return xasprintf("{\"apiVersion\":\"agents.x-k8s.io/v1beta1\",\"kind\":\"Sandbox\","
				 "\"metadata\":{\"name\":\"%s%05ld\"},"
				 "\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"sandbox\","
				 "\"image\":\"%s\",\"command\":[\"sleep\",\"infinity\"]," POD_RESOURCES "}]}}}}",
				 b->o.prefix, i, b->o.image);
	if (b->o.mode == MODE_CLAIM) /* the pod shape is the pool's template */
		return xasprintf("{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxClaim\","
				 "\"metadata\":{\"name\":\"%s%05ld\"},"
				 "\"spec\":{\"warmPoolRef\":{\"name\":\"%s\"}}}",
				 b->o.prefix, i, b->o.pool);
	char *lc = xstrdup("");
	if (b->o.shutdown_time) {
		free(lc);
		lc = xasprintf(",\"lifecycle\":{\"shutdownTime\":\"%s\"%s%s%s}", b->o.shutdown_time,
			       b->o.shutdown_policy ? ",\"shutdownPolicy\":\"" : "",
			       b->o.shutdown_policy ? b->o.shutdown_policy : "", b->o.shutdown_policy ? "\"" : "");
	}
	char owner[80];
	if (b->o.owner)
		snprintf(owner, sizeof owner, "%s", b->o.owner);
	else
		snprintf(owner, sizeof owner, "owner-%02ld", scope % b->o.owners);
	char *s = xasprintf("{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandbox\","
			    "\"metadata\":{\"name\":\"%s%05ld\"},"
			    "\"spec\":{\"image\":\"%s\",\"command\":[\"sleep\",\"infinity\"],"
			    "\"idempotencyKey\":\"%skey-%ld\",\"workspaceOwner\":\"%s\"%s}}",
			    b->o.prefix, i, b->o.image, b->o.prefix, scope, owner, lc);
	free(lc);
	return s;
}

/* The baseline's pod for Sandbox i (uid may be NULL): the shape of the
 * controller's at its defaults, the owner's folder of the namespace's
 * "sandbox-workspaces" claim mounted at /workspace (caller frees). */
static char *pod_body(const struct bench *b, long i, const char *uid)
{
	long scope = i % b->o.scopes;
	char *ref =
	    uid ? xasprintf(",\"ownerReferences\":[{\"apiVersion\":\"sandbox.dev/v1alpha1\","
			    "\"kind\":\"Sandbox\",\"name\":\"%s%05ld\",\"uid\":\"%s\","
			    "\"controller\":true,\"blockOwnerDeletion\":true}]",
			    b->o.prefix, i, uid)
		: xstrdup("");
	char *s =
	    xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"sbx-%ld\","
		      "\"labels\":{\"app.kubernetes.io/name\":\"sandbox\","
		      "\"app.kubernetes.io/managed-by\":\"sbx-bench\","
		      "\"sandbox.dev/scope-digest\":\"%032lx\"},"
		      "\"annotations\":{\"sandbox.dev/workspace-owner\":\"owner-%02ld\"}%s},"
		      "\"spec\":{\"containers\":[{\"name\":\"sandbox\",\"image\":\"%s\","
		      "\"command\":[\"sleep\",\"infinity\"],\"resources\":{"
		      "\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},"
		      "\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}},"
		      "\"volumeMounts\":[{\"name\":\"workspaces\",\"mountPath\":\"/workspace\","
		      "\"subPath\":\"owner-%02ld/workspace\"}]}],"
		      "\"volumes\":[{\"name\":\"workspaces\","
		      "\"persistentVolumeClaim\":{\"claimName\":\"sandbox-workspaces\"}}]}}",
		      i, (unsigned long)scope, scope % b->o.owners, ref, b->o.image, scope % b->o.owners);
	free(ref);
	return s;
}

/* The baseline's status merge patch for Sandbox i, Bound and (ready 1)
 * Ready too (caller frees). */
static char *status_body(long i, int ready)
{
	char ts[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xasprintf(
	    "{\"status\":{\"phase\":\"%s\",\"podName\":\"sbx-%ld\",\"binding\":\"Created\","
	    "\"observedGeneration\":1,\"conditions\":[{\"type\":\"Bound\",\"status\":\"True\","
	    "\"reason\":\"PodCreated\",\"message\":\"created by sbx-bench\","
	    "\"lastTransitionTime\":\"%s\",\"observedGeneration\":1},"
	    "{\"type\":\"Ready\",\"status\":\"%s\",\"reason\":\"%s\",\"message\":\"sbx-bench\","
	    "\"lastTransitionTime\":\"%s\",\"observedGeneration\":1}]}}",
	    ready ? "Running" : "Pending", i, ts, ready ? "True" : "False", ready ? "PodReady" : "PodPending", ts);
}

/* A baseline thread writing Ready for the pods found Ready. */
static void *patcher(void *arg)
{
	struct bench *b = arg;
	char path[512];
	for (;;) {
		pthread_mutex_lock(&b->mu);
		while (!b->ntodo && !b->stopping)
			pthread_cond_wait(&b->cv, &b->mu);
		if (!b->ntodo) {
			pthread_mutex_unlock(&b->mu);
			return NULL;
		}
		long i = b->todo[--b->ntodo];
		pthread_mutex_unlock(&b->mu);
		char *body = status_body(i, 1);
		snprintf(path, sizeof path,
			 "/apis/sandbox.dev/v1alpha1/namespaces/%s/sandboxes/%s%05ld/status", b->o.ns, b->o.prefix, i);
		if (request(b, "PATCH", path, body, "application/merge-patch+json", NULL) != KUBE_OK)
			atomic_fetch_add(&b->failed, 1);
		free(body);
	}
}

/* Baseline: the Pod and the status write that follow the Sandbox's POST. */
static int baseline_rest(struct bench *b, long i, const cJSON *created)
{
	char path[512];
	const char *uid = str_of(cJSON_GetObjectItemCaseSensitive(created, "metadata"), "uid");
	char *body = pod_body(b, i, uid);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", b->o.ns);
	enum kube_err e = request(b, "POST", path, body, NULL, NULL);
	free(body);
	if (e != KUBE_OK)
		return -1;
	body = status_body(i, 0);
	snprintf(path, sizeof path,
		 "/apis/sandbox.dev/v1alpha1/namespaces/%s/sandboxes/%s%05ld/status", b->o.ns, b->o.prefix, i);
	e = request(b, "PATCH", path, body, "application/merge-patch+json", NULL);
	free(body);
	return e == KUBE_OK ? 0 : -1;
}

/* A writer thread: opens its connection with a cheap GET (the controller's
 * are open already, so neither side is timed with TLS handshakes), waits for
 * the start, then takes the next index until all are done. */
static void *writer(void *arg)
{
	struct bench *b = arg;
	char path[512];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s", b->o.ns);
	struct kube_error err;
	if (kube_request(b->kc, "GET", path, NULL, NULL, NULL, NULL, &err) != KUBE_OK)
		fprintf(stderr, "sbx-bench: warm-up GET %s: %s\n", path, err.message);
	pthread_barrier_wait(&b->go);
	pthread_barrier_wait(&b->go); /* main has set t0 in between */
	collection_path(&b->o, path, sizeof path);
	for (long i; (i = atomic_fetch_add(&b->next, 1)) < b->o.count;) {
		char *body = sandbox_body(b, i);
		cJSON *created = NULL;
		double due = 0;
		if (b->o.rate > 0) { /* sustained: Sandbox i is due i/R seconds after the start */
			due = b->t0 + (double)i * 1000.0 / b->o.rate;
			double wait = due - now_ms();
			if (wait > 0)
				usleep((useconds_t)(wait * 1000));
		}
		/* Latency counts from when the Sandbox was due: a client that falls
		 * behind the offered rate must not hide its own backlog. */
		double ts = due > 0 ? due : now_ms();
		enum kube_err e = request(b, "POST", path, body, NULL, &created);
		free(body);
		double t = now_ms();
		if (e == KUBE_OK) {
			pthread_mutex_lock(&b->mu);
			b->sent[i] = ts;
			b->posted[i] = t;
			if (t > b->last_posted)
				b->last_posted = t;
			b->created++;
			pthread_mutex_unlock(&b->mu);
		}
		if (e != KUBE_OK ||
		    (b->o.mode == MODE_BASELINE && baseline_rest(b, i, created) < 0))
			atomic_fetch_add(&b->failed, 1);
		cJSON_Delete(created);
	}
	pthread_mutex_lock(&b->mu);
	b->done_posting++;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

/* ---- the run ---- */

/* With SBX_BENCH_TRACE=FILE, one line per Sandbox into FILE: its name, then
 * when it was due, answered and seen Bound, as wall-clock milliseconds since
 * the epoch (0: never), to lay beside the controller's log. */
static void write_trace(const struct bench *b)
{
	const char *path = getenv("SBX_BENCH_TRACE");
	FILE *f = path && *path ? fopen(path, "w") : NULL;
	if (!f)
		return;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	double off = (double)rt.tv_sec * 1e3 + (double)rt.tv_nsec / 1e6 - now_ms(); /* monotonic -> wall */
	for (long i = 0; i < b->o.count; i++) {
		const double v[] = { b->sent[i], b->posted[i], b->bound[i] };
		fprintf(f, "%s%05ld", b->o.prefix, i);
		for (size_t k = 0; k < 3; k++)
			fprintf(f, " %.1f", v[k] > 0 ? v[k] + off : 0);
		fputc('\n', f);
	}
	fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0..100) of the sorted v[0..n). */
static double percentile(const double *v, long n, double p)
{
	long r = (long)ceil(p / 100.0 * (double)n);
	return v[r < 1 ? 0 : r - 1];
}

/* Waits until the controller's request counter and CPU time stop moving (3
 * quiet seconds, at most 60), so follow-up work such as Ready updates is
 * counted. Returns the counter then (as requests_now). */
static double settle(const struct bench *b, struct buf *mb)
{
	double req = requests_now(b, mb), cpu = proc_cpu_s(b->o.pid);
	int quiet = 0;
	for (int s = 0; s < 60 && quiet < 3; s++) {
		sleep(1);
		double r2 = requests_now(b, mb), c2 = proc_cpu_s(b->o.pid);
		quiet = (r2 == req && c2 - cpu < 0.03) ? quiet + 1 : 0;
		req = r2;
		cpu = c2;
	}
	return req;
}

static void print_requests(const char *key, double before, double after, long n)
{
	if (before < 0 || after < 0 || n <= 0)
		printf("%s=n/a\n", key);
	else
		printf("%s=%.2f\n", key, (after - before) / (double)n);
}

/* The sum of the series of name whose labels hold key="value", or 0. */
static double metric_sum_label(const char *text, const char *name, const char *key, const char *value)
{
	char want[128];
	snprintf(want, sizeof want, "%s=\"%s\"", key, value);
	size_t nl = strlen(name);
	double sum = 0;
	for (const char *line = text; *line;) {
		const char *eol = strchrnul(line, '\n');
		if (!strncmp(line, name, nl) && line[nl] == '{') {
			const char *close = memchr(line, '}', (size_t)(eol - line));
			char *lab = close ? xstrndup(line, (size_t)(close - line)) : NULL;
			if (lab && strstr(lab, want))
				sum += strtod(close + 1, NULL);
			free(lab);
		}
		line = *eol ? eol + 1 : eol;
	}
	return sum;
}

static const char *const METHODS[] = { "GET", "POST", "PUT", "PATCH", "DELETE" };
#define NMETHODS 5

/* Requests by method from a scrape (0 each when absent). */
static void by_method(const struct buf *mb, double *out)
{
	for (int m = 0; m < NMETHODS; m++)
		out[m] = metric_sum_label(mb->data ? mb->data : "", REQUESTS_METRIC, "method", METHODS[m]);
}

/* Collects latencies (done[i] - from[i]) into a sorted array (caller frees). */
static double *latencies(struct bench *b, const double *done, long *n)
{
	double *lat = xcalloc((size_t)b->o.count + 1, sizeof *lat);
	*n = 0;
	pthread_mutex_lock(&b->mu);
	for (long i = 0; i < b->o.count; i++)
		if (done[i] > 0 && b->sent[i] > 0)
			lat[(*n)++] = done[i] > b->sent[i] ? done[i] - b->sent[i] : 0;
	pthread_mutex_unlock(&b->mu);
	qsort(lat, (size_t)*n, sizeof *lat, cmp_double);
	return lat;
}

static void print_latencies(const char *what, const double *lat, long n)
{
	printf("%s_p50_ms=%.1f\n%s_p90_ms=%.1f\n%s_p99_ms=%.1f\n%s_max_ms=%.1f\n", what,
	       n ? percentile(lat, n, 50) : 0.0, what, n ? percentile(lat, n, 90) : 0.0, what,
	       n ? percentile(lat, n, 99) : 0.0, what, n ? lat[n - 1] : 0.0);
}

static int run(struct bench *b)
{
	static const struct informer_handlers h = { on_add, on_update, NULL };
	static const struct informer_handlers ph = { pod_add, pod_update, NULL };
	char ipath[400];
	collection_path(&b->o, ipath, sizeof ipath);
	struct informer *inf = informer_new(b->kc, ipath, NULL, trim, NULL, &h, b);
	if (informer_start(inf) < 0 || !informer_wait_synced(inf, 60000)) {
		fprintf(stderr, "sbx-bench: the informer on %s did not sync\n", ipath);
		informer_free(inf);
		return 1;
	}
	struct informer *pods = NULL;
	pthread_t patchers[PATCHERS];
	if (b->o.mode == MODE_BASELINE) {
		char path[300];
		snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", b->o.ns);
		pods = informer_new(b->kc, path, "app.kubernetes.io/managed-by=sbx-bench", trim_pod, NULL, &ph, b);
		if (informer_start(pods) < 0 || !informer_wait_synced(pods, 60000)) {
			fprintf(stderr, "sbx-bench: the pod informer did not sync\n");
			return 1;
		}
		for (int t = 0; t < PATCHERS; t++)
			if (pthread_create(&patchers[t], NULL, patcher, b)) {
				fprintf(stderr, "sbx-bench: cannot start a patcher thread\n");
				exit(1);
			}
	}
	if (b->o.start_at > 0) { /* the writers' warm-up takes milliseconds */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double wait = b->o.start_at - ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
	}
	struct buf mb;
	buf_init(&mb, METRICS_MAX);
	int meter = b->o.pid > 0 && b->o.metrics_url;
	double m0[NMETHODS] = { 0 }, m1[NMETHODS] = { 0 };
	double req0 = meter ? requests_now(b, &mb) : -1, cpu0 = meter ? proc_cpu_s(b->o.pid) : -1;
	if (meter)
		by_method(&mb, m0);
	double rec0 = meter ? metric_sum(mb.data ? mb.data : "", "sandbox_reconciles_total") : -1;
	double rerr0 = meter ? metric_sum(mb.data ? mb.data : "", "sandbox_reconcile_errors_total") : -1;

	pthread_t *th = xcalloc((size_t)b->o.concurrency, sizeof *th);
	pthread_barrier_init(&b->go, NULL, (unsigned)b->o.concurrency + 1);
	for (int t = 0; t < b->o.concurrency; t++)
		if (pthread_create(&th[t], NULL, writer, b)) {
			fprintf(stderr, "sbx-bench: cannot start a writer thread\n");
			exit(1);
		}
	pthread_barrier_wait(&b->go);
	double t0 = b->t0 = now_ms();
	pthread_barrier_wait(&b->go);
	double deadline = t0 + (double)b->o.timeout_s * 1e3, last_note = t0;
	pthread_mutex_lock(&b->mu);
	while (b->done_posting < b->o.concurrency || (b->o.wait_ready ? b->nready : b->nbound) < b->created) {
		double t = now_ms();
		if (t >= deadline) {
			fprintf(stderr, "sbx-bench: timed out after %lds: %ld of %ld Sandboxes bound, %ld ready\n",
				b->o.timeout_s, b->nbound, b->created, b->nready);
			break;
		}
		if (t - last_note >= 10000) {
			fprintf(stderr, "sbx-bench: %.0fs: %ld created, %ld bound, %ld ready\n", (t - t0) / 1e3,
				b->created, b->nbound, b->nready);
			last_note = t;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&b->cv, &b->mu, &ts);
	}
	long created = b->created, nbound = b->nbound, nready = b->nready, adopted = b->adopted, warm = b->warm;
	double t_posted = b->last_posted, t_bound = b->last_bound, t_ready = b->last_ready;
	b->stopping = 1;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	for (int t = 0; t < b->o.concurrency; t++)
		pthread_join(th[t], NULL);
	free(th);
	if (pods) {
		for (int t = 0; t < PATCHERS; t++)
			pthread_join(patchers[t], NULL);
		informer_stop(pods);
	}
	pthread_barrier_destroy(&b->go);
	double req_bound = meter ? requests_now(b, &mb) : -1;
	double req_settled = meter ? settle(b, &mb) : -1;
	if (meter)
		by_method(&mb, m1);
	informer_stop(inf);

	write_trace(b);
	long nb, nr;
	double *lb = latencies(b, b->bound, &nb), *lr = latencies(b, b->ready, &nr);
	double sb = nbound ? (t_bound - t0) / 1e3 : 0, sr = nready ? (t_ready - t0) / 1e3 : 0;
	printf("count=%ld\ncreated=%ld\nbound=%ld\nready=%ld\nadopted=%ld\nwarm=%ld\nfailed=%ld\n", b->o.count,
	       created, nbound, nready, adopted, warm, atomic_load(&b->failed));
	printf("offered_rate=%.1f\n", b->o.rate);
	/* What the writers delivered: a client whose creates take longer than
	 * concurrency / rate falls behind the offered rate, and then it, not the
	 * server, sets the pace of everything after the create. */
	double sc = created ? (t_posted - t0) / 1e3 : 0;
	printf("create_seconds=%.3f\ncreate_rate=%.1f\n", sc, sc > 0 ? (double)created / sc : 0.0);
	printf("seconds=%.3f\nrate=%.1f\n", sb, sb > 0 ? (double)nbound / sb : 0.0);
	printf("ready_seconds=%.3f\nready_rate=%.1f\n", sr, sr > 0 ? (double)nready / sr : 0.0);
	long nc;
	double *lc = latencies(b, b->posted, &nc); /* the create itself: admission's cost as a client sees it */
	print_latencies("create", lc, nc);
	free(lc);
	print_latencies("bound", lb, nb);
	print_latencies("ready", lr, nr);
	/* The old names, kept for the summary. */
	printf("p50_ms=%.1f\np99_ms=%.1f\n", nb ? percentile(lb, nb, 50) : 0.0, nb ? percentile(lb, nb, 99) : 0.0);
	if (meter) {
		double cpu1 = proc_cpu_s(b->o.pid);
		print_requests("requests_per_sandbox_bound", req0, req_bound, b->o.count);
		print_requests("requests_per_sandbox_settled", req0, req_settled, b->o.count);
		for (int m = 0; m < NMETHODS; m++)
			printf("requests_%s=%.0f\n", METHODS[m], m1[m] - m0[m]);
		printf("requests_metric=%s\n", req0 == -2 ? "unreadable" : req0 < 0 ? "absent"
										    : "present");
		printf("cpu_s=%.2f\ncpu_run_s=%.2f\nrss_peak_kib=%ld\n", cpu1, cpu1 - cpu0, proc_hwm_kib(b->o.pid));
		/* mb holds the last scrape, taken once the controller was quiet. */
		double rec1 = metric_sum(mb.data ? mb.data : "", "sandbox_reconciles_total");
		double rerr1 = metric_sum(mb.data ? mb.data : "", "sandbox_reconcile_errors_total");
		if (rec0 >= 0 && rec1 >= 0 && rerr0 >= 0 && rerr1 >= 0)
			printf("reconciles=%.0f\nreconcile_errors=%.0f\n", rec1 - rec0, rerr1 - rerr0);
	}
	free(lb);
	free(lr);
	buf_release(&mb);
	informer_free(inf);
	informer_free(pods);
	return (b->o.wait_ready ? nready : nbound) == b->o.count ? 0 : 1;
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: sbx-bench controller|baseline|peer|claim --namespace NS [--count N] [--concurrency C]\n"
	       "                 [--rate R] [--scopes S] [--owners O] [--image IMG] [--timeout SECONDS]\n"
	       "                 [--wait bound|ready] [--pid PID --metrics-url URL] [--start-at UNIX_S]\n"
	       "                 [--shutdown-time RFC3339 [--shutdown-policy Retain|Delete]] [--pool NAME]\n"
	       "                 [--prefix P] [--owner NAME]\n");
}

/* Parses a positive integer option; exits with usage on anything else. */
static long positive(const char *name, const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < 1) {
		fprintf(stderr, "sbx-bench: --%s must be a positive integer\n", name);
		exit(2);
	}
	return v;
}

/* Returns s, a value that goes into the JSON bodies as it is, when it is
 * made only of the characters in set; exits with a message otherwise. */
static const char *json_safe(const char *name, const char *s, const char *set)
{
	if (!*s || s[strspn(s, set)]) {
		fprintf(stderr, "sbx-bench: --%s may hold only the characters %s\n", name, set);
		exit(2);
	}
	return s;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "namespace", required_argument, NULL, 'n' },
		{ "count", required_argument, NULL, 'c' },
		{ "concurrency", required_argument, NULL, 'j' },
		{ "scopes", required_argument, NULL, 's' },
		{ "owners", required_argument, NULL, 'o' },
		{ "image", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "metrics-url", required_argument, NULL, 'm' },
		{ "rate", required_argument, NULL, 'r' },
		{ "wait", required_argument, NULL, 'w' },
		{ "start-at", required_argument, NULL, 'a' },
		{ "shutdown-time", required_argument, NULL, 'T' },
		{ "shutdown-policy", required_argument, NULL, 'P' },
		{ "pool", required_argument, NULL, 'W' },
		{ "prefix", required_argument, NULL, 'X' },
		{ "owner", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b = { .o = { .image = "registry.local/agent:1.0",
				  .count = 1000,
				  .concurrency = 8,
				  .owners = 50,
				  .timeout_s = 600,
				  .wait_ready = 1,
				  .prefix = "bench-" } };
	if (argc < 2 || (strcmp(argv[1], "controller") && strcmp(argv[1], "baseline") && strcmp(argv[1], "peer") &&
			 strcmp(argv[1], "claim"))) {
		usage(stderr);
		return 2;
	}
	b.o.mode = !strcmp(argv[1], "controller") ? MODE_CONTROLLER
		   : !strcmp(argv[1], "peer")	  ? MODE_PEER
		   : !strcmp(argv[1], "claim")	  ? MODE_CLAIM
						  : MODE_BASELINE;
	int opt;
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			b.o.ns = optarg;
			break;
		case 'c':
			b.o.count = positive("count", optarg);
			break;
		case 'j':
			b.o.concurrency = (int)positive("concurrency", optarg);
			break;
		case 's':
			b.o.scopes = positive("scopes", optarg);
			break;
		case 'o':
			b.o.owners = positive("owners", optarg);
			break;
		case 'i':
			b.o.image = optarg;
			break;
		case 't':
			b.o.timeout_s = positive("timeout", optarg);
			break;
		case 'p':
			b.o.pid = (pid_t)positive("pid", optarg);
			break;
		case 'm':
			b.o.metrics_url = optarg;
			break;
		case 'r':
			b.o.rate = strtod(optarg, NULL);
			if (!(b.o.rate > 0)) {
				fprintf(stderr, "sbx-bench: --rate must be positive\n");
				return 2;
			}
			break;
		case 'w':
			b.o.wait_ready = !strcmp(optarg, "ready");
			if (!b.o.wait_ready && strcmp(optarg, "bound")) {
				usage(stderr);
				return 2;
			}
			break;
		case 'a':
			b.o.start_at = strtod(optarg, NULL);
			if (!(b.o.start_at > 0)) {
				fprintf(stderr, "sbx-bench: --start-at must be seconds since the epoch\n");
				return 2;
			}
			break;
		case 'T':
			b.o.shutdown_time = json_safe("shutdown-time", optarg, "0123456789-:.TZ+");
			break;
		case 'P':
			b.o.shutdown_policy = optarg;
			if (strcmp(optarg, "Retain") && strcmp(optarg, "Delete")) {
				fprintf(stderr, "sbx-bench: --shutdown-policy is Retain or Delete\n");
				return 2;
			}
			break;
		case 'W':
			b.o.pool = json_safe("pool", optarg, "abcdefghijklmnopqrstuvwxyz0123456789-.");
			break;
		case 'X':
			b.o.prefix = json_safe("prefix", optarg, "abcdefghijklmnopqrstuvwxyz0123456789-");
			if (strlen(optarg) > 40) {
				fprintf(stderr, "sbx-bench: --prefix is at most 40 characters\n");
				return 2;
			}
			break;
		case 'O':
			b.o.owner = json_safe("owner", optarg, "abcdefghijklmnopqrstuvwxyz0123456789-.");
			if (strlen(optarg) > 63) {
				fprintf(stderr, "sbx-bench: --owner is at most 63 characters\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!b.o.ns || optind < argc || b.o.count > 99999 || b.o.concurrency > 256 ||
	    (b.o.mode == MODE_CLAIM) != (b.o.pool != NULL) || (b.o.shutdown_policy && !b.o.shutdown_time) ||
	    (b.o.shutdown_time && b.o.mode != MODE_CONTROLLER)) {
		usage(stderr);
		return 2;
	}
	if (!b.o.scopes || b.o.scopes > b.o.count)
		b.o.scopes = b.o.count;
	log_set_level(LOG_WARN);

	char err[1024];
	struct kube_config *cfg = kube_config_load(NULL, NULL, err, sizeof err);
	if (!cfg) {
		fprintf(stderr, "sbx-bench: kubeconfig: %s\n", err);
		return 1;
	}
	/* No client-side limit: the bench must not be the bottleneck it measures. */
	struct kube_client_opts co = { .qps = -1, .user_agent = "sbx-bench" };
	b.kc = kube_client_new(cfg, &co);
	if (!b.kc) {
		fprintf(stderr, "sbx-bench: cannot initialise the HTTP client\n");
		return 1;
	}
	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.cv, NULL);
	size_t n = (size_t)b.o.count;
	b.sent = xcalloc(n, sizeof *b.sent);
	b.posted = xcalloc(n, sizeof *b.posted);
	b.bound = xcalloc(n, sizeof *b.bound);
	b.ready = xcalloc(n, sizeof *b.ready);
	b.todo = xcalloc(n, sizeof *b.todo);
	b.patched = xcalloc(n, 1);
	int rc = run(&b);
	free(b.sent);
	free(b.posted);
	free(b.bound);
	free(b.ready);
	free(b.todo);
	free(b.patched);
	pthread_cond_destroy(&b.cv);
	pthread_mutex_destroy(&b.mu);
	kube_client_free(b.kc);
	return rc;
}
