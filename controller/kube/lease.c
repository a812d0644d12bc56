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
	atomic_int leader;
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

/* One attempt to acquire or renew. Returns 1 when we hold the lease now. */
static int try_acquire_or_renew(struct lease_elector *e)
{
	char now[48];
	micro_now(now, sizeof now);
	char *item = path_of(e, 1);
	cJSON *lease = NULL;
	struct kube_error err;
	enum kube_err r = kube_request(e->c, "GET", item, NULL, NULL, NULL, &lease, &err);
	int ok = 0;
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
		ok = kube_request(e->c, "POST", coll, NULL, body, NULL, NULL, &err) == KUBE_OK;
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
	if (!lease_can_take(holder, e->identity, (long long)(t - e->seen_at_ms), duration))
		goto out;
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
	ok = kube_request(e->c, "PUT", item, NULL, body, NULL, NULL, &err) == KUBE_OK;
	free(body);
out:
	cJSON_Delete(lease);
	free(item);
	return ok;
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

static void *campaign(void *arg)
{
	struct lease_elector *e = arg;
	int64_t last_renew = 0;
	while (!atomic_load(&e->stop)) {
		int ok = try_acquire_or_renew(e);
		int64_t t = ktime_mono_ms();
		if (ok) {
			last_renew = t;
			if (!atomic_exchange(&e->leader, 1))
				log_kv(LOG_INFO, "became leader", "lease", e->name, "identity", e->identity);
		} else if (atomic_load(&e->leader) && t - last_renew >= (int64_t)e->deadline_s * 1000) {
			atomic_store(&e->leader, 0);
			atomic_store(&e->lost, 1);
			log_kv(LOG_ERROR, "leadership lost: no renewal within the renew deadline", "lease", e->name);
			break;
		}
		if (nap(e, (int64_t)e->retry_s * 1000))
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
	return atomic_load(&e->leader);
}

int lease_lost(struct lease_elector *e)
{
	return atomic_load(&e->lost);
}

/* Gives the lease up (empty holder, 1 s duration) if we still hold it. */
static void release(struct lease_elector *e)
{
	char *item = path_of(e, 1);
	cJSON *lease = NULL;
	if (kube_request(e->c, "GET", item, NULL, NULL, NULL, &lease, NULL) == KUBE_OK) {
		cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
		const char *holder = jstr(spec, "holderIdentity");
		if (holder && !strcmp(holder, e->identity)) {
			char now[48];
			micro_now(now, sizeof now);
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "holderIdentity", cJSON_CreateString(""));
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "leaseDurationSeconds", cJSON_CreateNumber(1));
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "renewTime", cJSON_CreateString(now));
			char *body = cJSON_PrintUnformatted(lease);
			if (kube_request(e->c, "PUT", item, NULL, body, NULL, NULL, NULL) == KUBE_OK)
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
	if (atomic_load(&e->leader))
		release(e);
	elector_destroy(e);
}
