#define _GNU_SOURCE
#include "kube/lease.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "base/xmalloc.h"
#include "base/ktime.h"
#include "obs/log.h"

struct lease_elector {
	struct kube_client *c;
	char *ns, *name, *identity;
	int duration_s, deadline_s, retry_s;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_int stop;
	/* While leader: when leadership ends unless renewed (monotonic ms: the
	 * start of the last successful renewal plus the renew deadline); 0
	 * otherwise. Readers compare it with the clock, so leadership ends at
	 * the deadline even while the lease thread is inside a request. */
	_Atomic int64_t leader_until_ms;
	atomic_int lost;
	/* The last record seen and when it was seen to change (monotonic ms). */
	char *seen_record;
	int64_t seen_at_ms;
};

int lease_can_take(const char *holder, const char *identity, long long unchanged_ms, int lease_duration_s)
{
	if (!holder || !*holder || !strcmp(holder, identity))
		return 1;
	return unchanged_ms >= (long long)lease_duration_s * 1000;
}

/* Lease times are MicroTime: RFC 3339 with microseconds. */
static void micro_now(char *out, size_t n)
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	char base[32];
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, n, "%s.%06ldZ", base, (long)tv.tv_usec);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *path_of(const struct lease_elector *e, int item)
{
	return item ? xasprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", e->ns, e->name)
		    : xasprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases", e->ns);
}

/* kube_request that gives up at until_ms (monotonic), and at once when abort
 * is set, so a hung connection cannot hold the lease thread past the renew
 * deadline (client-go cancels its renewal requests at RenewDeadline the same
 * way). At or past until_ms nothing is sent and KUBE_ERR_TRANSPORT returned.
 * The client-side rate limit (--kube-api-qps) does not hold it: the lease
 * shares the client with the workers, the informers and the event senders,
 * whose reservations queue a request for about threads/qps (17 s at 64
 * workers and 5 qps), past any renew deadline; a few requests every retry
 * period do not need the limit. */
static enum kube_err request_until(struct lease_elector *e, const char *method, const char *path,
				   const char *body, int64_t until_ms, const atomic_int *abort,
				   cJSON **out)
{
	int64_t left = until_ms - ktime_mono_ms();
	if (left <= 0) {
		if (out)
			*out = NULL;
		return KUBE_ERR_TRANSPORT;
	}
	struct kube_request_opts ro = { .timeout_ms = (long)left, .abort = abort, .unthrottled = 1 };
	return kube_request_ex(e->c, method, path, NULL, body, NULL, &ro, out, NULL);
}

enum attempt {
	ATTEMPT_FAILED, /* no answer, an error, or a lost race: retry */
	ATTEMPT_HELD,	/* we hold the lease now */
	ATTEMPT_TAKEN,	/* another identity holds a lease that has not expired */
};

/* One attempt to acquire or renew, every request of it ending by until_ms. */
static enum attempt try_acquire_or_renew(struct lease_elector *e, int64_t until_ms)
{
	char now[48];
	micro_now(now, sizeof now);
	char *item = path_of(e, 1);
	cJSON *lease = NULL;
	enum kube_err r = request_until(e, "GET", item, NULL, until_ms, &e->stop, &lease);
	enum attempt res = ATTEMPT_FAILED;
	if (r == KUBE_ERR_NOT_FOUND) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1");
		cJSON_AddStringToObject(o, "kind", "Lease");
		cJSON *m = cJSON_AddObjectToObject(o, "metadata");
		cJSON_AddStringToObject(m, "name", e->name);
		cJSON_AddStringToObject(m, "namespace", e->ns);
		cJSON *s = cJSON_AddObjectToObject(o, "spec");
		cJSON_AddStringToObject(s, "holderIdentity", e->identity);
		cJSON_AddNumberToObject(s, "leaseDurationSeconds", e->duration_s);
		cJSON_AddStringToObject(s, "acquireTime", now);
		cJSON_AddStringToObject(s, "renewTime", now);
		cJSON_AddNumberToObject(s, "leaseTransitions", 0);
		char *body = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		char *coll = path_of(e, 0);
		if (request_until(e, "POST", coll, body, until_ms, &e->stop, NULL) == KUBE_OK)
			res = ATTEMPT_HELD;
		free(coll);
		free(body);
		goto out;
	}
	if (r != KUBE_OK)
		goto out;
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
	if (!cJSON_IsObject(spec)) {
		spec = cJSON_CreateObject();
		cJSON_ReplaceItemInObjectCaseSensitive(lease, "spec", spec);
	}
	/* Watch the record change on our own clock. */
	char *record = cJSON_PrintUnformatted(spec);
	int64_t t = ktime_mono_ms();
	if (!e->seen_record || strcmp(record, e->seen_record)) {
		free(e->seen_record);
		e->seen_record = record;
		e->seen_at_ms = t;
	} else {
		free(record);
	}
	const char *holder = jstr(spec, "holderIdentity");
	const cJSON *dur = cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds");
	int duration = cJSON_IsNumber(dur) && dur->valueint > 0 ? dur->valueint : e->duration_s;
	if (!lease_can_take(holder, e->identity, (long long)(t - e->seen_at_ms), duration)) {
		res = ATTEMPT_TAKEN;
		goto out;
	}
	int changing_hands = !holder || strcmp(holder, e->identity);
	cJSON_ReplaceItemInObjectCaseSensitive(spec, "holderIdentity", cJSON_CreateString(e->identity));
	cJSON_ReplaceItemInObjectCaseSensitive(spec, "leaseDurationSeconds", cJSON_CreateNumber(e->duration_s));
	cJSON_ReplaceItemInObjectCaseSensitive(spec, "renewTime", cJSON_CreateString(now));
	if (changing_hands) {
		const cJSON *tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
		int n = cJSON_IsNumber(tr) ? tr->valueint + 1 : 1;
		cJSON_ReplaceItemInObjectCaseSensitive(spec, "acquireTime", cJSON_CreateString(now));
		cJSON_ReplaceItemInObjectCaseSensitive(spec, "leaseTransitions", cJSON_CreateNumber(n));
	}
	/* The PUT carries the resourceVersion we read: a racing replica gets a Conflict. */
	char *body = cJSON_PrintUnformatted(lease);
	if (request_until(e, "PUT", item, body, until_ms, &e->stop, NULL) == KUBE_OK)
		res = ATTEMPT_HELD;
	free(body);
out:
	cJSON_Delete(lease);
	free(item);
	return res;
}

/* Sleeps up to ms; returns 1 when asked to stop. */
static int nap(struct lease_elector *e, int64_t ms)
{
	int64_t deadline = ktime_mono_ms() + ms;
	pthread_mutex_lock(&e->mu);
	while (!atomic_load(&e->stop) && ktime_cond_wait_until(&e->cv, &e->mu, deadline) == 0)
		;
	pthread_mutex_unlock(&e->mu);
	return atomic_load(&e->stop);
}

/* Ends leadership for good. lost is set first, so lease_lost never reads 0
 * for a leader that is one no more. */
static void step_down(struct lease_elector *e, const char *why)
{
	atomic_store(&e->lost, 1);
	atomic_store(&e->leader_until_ms, 0);
	log_kv(LOG_ERROR, "leadership lost", "lease", e->name, "reason", why);
}

static void *campaign(void *arg)
{
	struct lease_elector *e = arg;
	const int64_t deadline_ms = (int64_t)e->deadline_s * 1000;
	const int64_t retry_ms = (int64_t)e->retry_s * 1000;
	while (!atomic_load(&e->stop)) {
		int64_t start = ktime_mono_ms();
		int64_t until = atomic_load(&e->leader_until_ms);
		if (until && start >= until) {
			step_down(e, "no renewal within the renew deadline");
			break;
		}
		/* A standby's attempt has the same budget, so a lease it wins has
		 * not half gone stale on the way. */
		enum attempt a = try_acquire_or_renew(e, until ? until : start + deadline_ms);
		if (a == ATTEMPT_HELD) {
			/* From the start: the lease's renewTime, and the standbys'
			 * clocks, may date from the moment the request left. */
			atomic_store(&e->leader_until_ms, start + deadline_ms);
			if (!until)
				log_kv(LOG_INFO, "became leader", "lease", e->name, "identity", e->identity);
			until = start + deadline_ms;
		} else if (until && a == ATTEMPT_TAKEN) {
			step_down(e, "the lease is held by another identity");
			break;
		}
		/* A failed renewal is retried, but the step-down comes at the
		 * deadline, not a retry period later; a renewal so slow that the
		 * next one would start past the deadline is tried again at once. */
		int64_t t = ktime_mono_ms();
		int64_t next = t + retry_ms;
		if (until && next > until)
			next = a == ATTEMPT_HELD ? t : until;
		if (nap(e, next - t))
			break;
	}
	return NULL;
}

/* Frees e and what it owns; its thread is not running. */
static void elector_destroy(struct lease_elector *e)
{
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	free(e->seen_record);
	free(e->ns);
	free(e->name);
	free(e->identity);
	free(e);
}

struct lease_elector *lease_elector_start(struct kube_client *c, const struct lease_opts *o)
{
	struct lease_elector *e = xcalloc(1, sizeof *e);
	e->c = c;
	e->ns = xstrdup(o->ns);
	e->name = xstrdup(o->name);
	e->identity = xstrdup(o->identity);
	e->duration_s = o->lease_duration_s > 0 ? o->lease_duration_s : 15;
	e->deadline_s = o->renew_deadline_s > 0 ? o->renew_deadline_s : 10;
	e->retry_s = o->retry_period_s > 0 ? o->retry_period_s : 2;
	pthread_mutex_init(&e->mu, NULL);
	ktime_cond_init(&e->cv);
	if (pthread_create(&e->thread, NULL, campaign, e) != 0) {
		elector_destroy(e);
		return NULL;
	}
	return e;
}

int lease_is_leader(struct lease_elector *e)
{
	int64_t until = atomic_load(&e->leader_until_ms);
	return until && ktime_mono_ms() < until;
}

int lease_lost(struct lease_elector *e)
{
	if (atomic_load(&e->lost))
		return 1;
	int64_t until = atomic_load(&e->leader_until_ms);
	return until && ktime_mono_ms() >= until;
}

/* Gives the lease up (empty holder, 1 s duration) if we still hold it, within
 * one renew deadline: shutdown must not wait out a hung connection. */
static void release(struct lease_elector *e)
{
	int64_t until = ktime_mono_ms() + (int64_t)e->deadline_s * 1000;
	char *item = path_of(e, 1);
	cJSON *lease = NULL;
	if (request_until(e, "GET", item, NULL, until, NULL, &lease) == KUBE_OK) {
		cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
		const char *holder = jstr(spec, "holderIdentity");
		if (holder && !strcmp(holder, e->identity)) {
			char now[48];
			micro_now(now, sizeof now);
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "holderIdentity", cJSON_CreateString(""));
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "leaseDurationSeconds", cJSON_CreateNumber(1));
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "renewTime", cJSON_CreateString(now));
			char *body = cJSON_PrintUnformatted(lease);
			if (request_until(e, "PUT", item, body, until, NULL, NULL) == KUBE_OK)
				log_kv(LOG_INFO, "released leadership", "lease", e->name);
			free(body);
		}
	}
	cJSON_Delete(lease);
	free(item);
}

void lease_elector_free(struct lease_elector *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	atomic_store(&e->stop, 1);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thread, NULL);
	/* Past the deadline leadership is lost already, even if the thread did
	 * not get to say so: as after a step-down, nothing is released. */
	if (lease_is_leader(e))
		release(e);
	elector_destroy(e);
}
