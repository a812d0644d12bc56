/* sbx-expiry: the expiry meter behind hack/bench-expiry.sh. Not shipped.
 *
 *   sbx-expiry --namespace NS --at UNIX_S [--timeout SECONDS]
 *
 * Watches the controller's pods (app.kubernetes.io/managed-by=sandbox-controller)
 * and the Sandboxes in NS from before the moment AT (seconds since the epoch,
 * the Sandboxes' shared spec.lifecycle.shutdownTime) until every pod present
 * at the start is gone and every Sandbox present at the start is done: phase
 * Expired (shutdownPolicy Retain) or deleted (Delete). Times are wall-clock
 * seconds from AT as the watches saw each change:
 *
 *   pods_deleting   the pod got its deletionTimestamp (the controller's DELETE)
 *   pods_gone       the pod left the API (kwok finished it)
 *   sandboxes_done  the Sandbox turned Expired, or was deleted before it did
 *
 * each with first/p50/p99/last. Anything seen before AT is counted as early
 * (an expiry must never come before its time). Results go to stdout as
 * KEY=VALUE lines, progress to stderr; exits 1 when the timeout (from AT,
 * default 900 s) came first. Credentials come from $KUBECONFIG. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "obs/log.h"

#define POD_SELECTOR "app.kubernetes.io/managed-by=sandbox-controller"

/* One kind of change: when each was seen, in seconds from AT. */
struct series {
	double *t;
	long n, cap;
	long early; /* seen before AT */
};

struct watch {
	double at; /* wall-clock seconds */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct series deleting, gone, done;
	int started; /* the informers synced: deletes from now on count */
};

/* Wall-clock seconds since the epoch. */
static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Records one change now (under w->mu). */
static void note(struct watch *w, struct series *s)
{
	double t = wall_s() - w->at;
	if (t < 0)
		s->early++;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->t = xrealloc(s->t, (size_t)s->cap * sizeof *s->t);
	}
	s->t[s->n++] = t;
	pthread_cond_broadcast(&w->cv);
}

static const cJSON *member(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
	return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

/* Keeps name, deletionTimestamp and status.phase: all the handlers read. */
static cJSON *trim(const cJSON *obj)
{
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	static const char *const keep[] = { "name", "namespace", "resourceVersion",
					    "deletionTimestamp", NULL };
	for (const char *const *k = keep; *k; k++) {
		const cJSON *v = member(obj, "metadata", *k);
		if (v)
			cJSON_AddItemToObject(m, *k, cJSON_Duplicate(v, 1));
	}
	const cJSON *phase = member(obj, "status", "phase");
	if (cJSON_IsString(phase))
		cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "status"), "phase",
					phase->valuestring);
	return t;
}

static int deleting(const cJSON *o)
{
	return member(o, "metadata", "deletionTimestamp") != NULL;
}

static int expired(const cJSON *o)
{
	const cJSON *p = member(o, "status", "phase");
	return cJSON_IsString(p) && !strcmp(p->valuestring, "Expired");
}

static void pod_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	struct watch *w = ctx;
	if (deleting(new_obj) && !deleting(old_obj)) {
		pthread_mutex_lock(&w->mu);
		note(w, &w->deleting);
		pthread_mutex_unlock(&w->mu);
	}
}

static void pod_delete(void *ctx, const cJSON *obj)
{
	struct watch *w = ctx;
	pthread_mutex_lock(&w->mu);
	if (w->started) {
		if (!deleting(obj)) /* gone in one step: the delete counts as its start too */
			note(w, &w->deleting);
		note(w, &w->gone);
	}
	pthread_mutex_unlock(&w->mu);
}

static void sbx_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	struct watch *w = ctx;
	if (expired(new_obj) && !expired(old_obj)) {
		pthread_mutex_lock(&w->mu);
		note(w, &w->done);
		pthread_mutex_unlock(&w->mu);
	}
}

static void sbx_delete(void *ctx, const cJSON *obj)
{
	struct watch *w = ctx;
	pthread_mutex_lock(&w->mu);
	if (w->started && !expired(obj))
		note(w, &w->done);
	pthread_mutex_unlock(&w->mu);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Prints NAME_count, _early, _first_s, _p50_s, _p99_s, _last_s (nearest rank). */
static void print_series(const char *name, struct series *s)
{
	qsort(s->t, (size_t)s->n, sizeof *s->t, cmp_double);
	printf("%s_count=%ld\n%s_early=%ld\n", name, s->n, name, s->early);
	if (!s->n) {
		printf("%s_first_s=n/a\n%s_p50_s=n/a\n%s_p99_s=n/a\n%s_last_s=n/a\n", name, name,
		       name, name);
		return;
	}
	long r50 = (long)ceil(0.50 * (double)s->n), r99 = (long)ceil(0.99 * (double)s->n);
	printf("%s_first_s=%.3f\n%s_p50_s=%.3f\n%s_p99_s=%.3f\n%s_last_s=%.3f\n", name, s->t[0],
	       name, s->t[r50 - 1], name, s->t[r99 - 1], name, s->t[s->n - 1]);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sbx-expiry --namespace NS --at UNIX_S [--timeout SECONDS]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "namespace", required_argument, NULL, 'n' },
		{ "at", required_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ns = NULL;
	double at = 0;
	long timeout_s = 900;
	int opt;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		char *end;
		switch (opt) {
		case 'n':
			ns = optarg;
			break;
		case 'a':
			at = strtod(optarg, &end);
			if (*end || !(at > 0)) {
				fprintf(stderr,
					"sbx-expiry: --at must be seconds since the epoch\n");
				return 2;
			}
			break;
		case 't':
			errno = 0;
			timeout_s = strtol(optarg, &end, 10);
			if (errno || *end || timeout_s < 1) {
				fprintf(stderr,
					"sbx-expiry: --timeout must be a positive integer\n");
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
	if (!ns || !(at > 0) || optind < argc) {
		usage(stderr);
		return 2;
	}
	log_set_level(LOG_WARN);
	char err[1024];
	struct kube_config *cfg = kube_config_load(NULL, NULL, err, sizeof err);
	if (!cfg) {
		fprintf(stderr, "sbx-expiry: kubeconfig: %s\n", err);
		return 1;
	}
	struct kube_client_opts co = { .qps = -1, .user_agent = "sbx-expiry" };
	struct kube_client *kc = kube_client_new(cfg, &co);
	if (!kc) {
		fprintf(stderr, "sbx-expiry: cannot initialise the HTTP client\n");
		return 1;
	}
	struct watch w = { .at = at };
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	static const struct informer_handlers ph = { NULL, pod_update, pod_delete };
	static const struct informer_handlers sh = { NULL, sbx_update, sbx_delete };
	char ppath[300], spath[300];
	snprintf(ppath, sizeof ppath, "/api/v1/namespaces/%s/pods", ns);
	snprintf(spath, sizeof spath, "/apis/sandbox.dev/v1alpha1/namespaces/%s/sandboxes", ns);
	struct informer *pods = informer_new(kc, ppath, POD_SELECTOR, trim, NULL, &ph, &w);
	struct informer *sbxs = informer_new(kc, spath, NULL, trim, NULL, &sh, &w);
	int rc = 1;
	if (informer_start(pods) < 0 || informer_start(sbxs) < 0 ||
	    !informer_wait_synced(pods, 120000) || !informer_wait_synced(sbxs, 120000)) {
		fprintf(stderr, "sbx-expiry: the informers did not sync\n");
		goto out;
	}
	/* What is there now is what must go: counted from the caches, after which
	 * every delete counts (one that raced the sync was not in the cache). */
	pthread_mutex_lock(&w.mu);
	long npods = (long)informer_size(pods), nsbx = (long)informer_size(sbxs), done0 = 0;
	cJSON *all = informer_list(sbxs), *o;
	cJSON_ArrayForEach(o, all) done0 += expired(o);
	cJSON_Delete(all);
	w.started = 1;
	pthread_mutex_unlock(&w.mu);
	fprintf(stderr,
		"sbx-expiry: %ld pods and %ld Sandboxes in %s (%ld Expired already), %.1f s before "
		"the shutdownTime\n",
		npods, nsbx, ns, done0, at - wall_s());
	double last_note = wall_s();
	pthread_mutex_lock(&w.mu);
	while (w.gone.n < npods || w.done.n + done0 < nsbx) {
		double now = wall_s();
		if (now - at >= (double)timeout_s) {
			fprintf(stderr,
				"sbx-expiry: timed out %ld s after the shutdownTime: %ld of %ld "
				"pods gone, %ld of %ld Sandboxes done\n",
				timeout_s, w.gone.n, npods, w.done.n + done0, nsbx);
			break;
		}
		if (now - last_note >= 5 && now > at) {
			fprintf(stderr,
				"sbx-expiry: +%.0fs: %ld pods deleting, %ld of %ld gone; %ld of "
				"%ld Sandboxes done\n",
				now - at, w.deleting.n, w.gone.n, npods, w.done.n + done0, nsbx);
			last_note = now;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&w.cv, &w.mu, &ts);
	}
	rc = w.gone.n >= npods && w.done.n + done0 >= nsbx ? 0 : 1;
	printf("pods=%ld\nsandboxes=%ld\nexpired_before_start=%ld\n", npods, nsbx, done0);
	print_series("pods_deleting", &w.deleting);
	print_series("pods_gone", &w.gone);
	print_series("sandboxes_done", &w.done);
	pthread_mutex_unlock(&w.mu);
out:
	informer_stop(pods);
	informer_stop(sbxs);
	informer_free(pods);
	informer_free(sbxs);
	free(w.deleting.t);
	free(w.gone.t);
	free(w.done.t);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	kube_client_free(kc);
	return rc;
}
