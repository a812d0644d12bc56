#include "reconcile/netkeep.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jsonget.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "reconcile/state.h"
#include "sandbox/netfloor.h"

/* What the keeper knows of one namespace (key: its name). */
struct ns_state {
	char ns[64];
	int pods;	 /* pods of sandboxes in the pod caches */
	int dirty;	 /* to be looked at */
	double made;	 /* when this process last made its policy */
	double removed;	 /* when it last removed it */
	double last_pod; /* when it last had one (or one was ensured) */
};

/* One pod seen in a pod cache (key: its uid). */
struct pod_ref {
	char ns[64];
	int refs; /* how many pod informers hold it */
};

struct sbx_netkeep {
	struct sbx_controller *c;
	struct informer *policies;
	pthread_mutex_t mu; /* guards both maps together */
	struct strmap *namespaces, *pods;
	pthread_mutex_t wake_mu;
	pthread_cond_t wake;
	int stop, kick;
	pthread_t thread;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void kick(struct sbx_netkeep *k)
{
	pthread_mutex_lock(&k->wake_mu);
	k->kick = 1;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->wake_mu);
}

/* The entry of ns (made when absent); k->mu and its map's lock held. NULL
 * for a name that cannot be a namespace's. */
static struct ns_state *ns_entry(struct sbx_netkeep *k, const char *ns)
{
	int created = 0;
	if (strlen(ns) >= sizeof((struct ns_state *)0)->ns)
		return NULL;
	struct ns_state *s = strmap_put(k->namespaces, ns, &created);
	if (s && created)
		snprintf(s->ns, sizeof s->ns, "%s", ns);
	return s;
}

/* Marks ns to be looked at. */
static void mark(struct sbx_netkeep *k, const char *ns)
{
	if (!ns)
		return;
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->namespaces);
	struct ns_state *s = ns_entry(k, ns);
	if (s)
		s->dirty = 1;
	strmap_unlock(k->namespaces);
	pthread_mutex_unlock(&k->mu);
	kick(k);
}

void sbx_netkeep_pod(struct sbx_controller *c, const cJSON *pod, int gone)
{
	struct sbx_netkeep *k = c->netkeep;
	const char *uid = meta_str(pod, "uid"), *ns = meta_str(pod, "namespace");
	if (!k || !uid || !ns || strlen(ns) >= sizeof((struct pod_ref *)0)->ns)
		return;
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->pods);
	strmap_lock(k->namespaces);
	int created = 0, delta = 0;
	struct pod_ref *p = gone ? strmap_get(k->pods, uid) : strmap_put(k->pods, uid, &created);
	if (p && !gone) {
		if (created) {
			snprintf(p->ns, sizeof p->ns, "%s", ns);
			delta = 1;
		}
		p->refs++;
	} else if (p && --p->refs <= 0) {
		strmap_del(k->pods, uid);
		delta = -1;
	}
	struct ns_state *s = ns_entry(k, ns);
	if (s) {
		s->pods += delta;
		s->last_pod = now_s();
		if (delta)
			s->dirty = 1;
	}
	strmap_unlock(k->namespaces);
	strmap_unlock(k->pods);
	pthread_mutex_unlock(&k->mu);
	if (delta)
		kick(k);
}

static void on_policy(void *ctx, const cJSON *obj)
{
	mark(ctx, meta_str(obj, "namespace"));
}

static void on_policy_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	(void)old_obj;
	mark(ctx, meta_str(new_obj, "namespace"));
}

/* Writes the floor of ns: POST when have is NULL, else PUT over have. */
static enum kube_err write_floor(struct sbx_netkeep *k, const char *ns, const cJSON *have, struct kube_error *err)
{
	cJSON *want = sbx_netfloor_policy(ns, &k->c->cfg->net);
	char path[512];
	const char *rv = have ? meta_str(have, "resourceVersion") : NULL;
	if (rv)
		cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(want, "metadata"), "resourceVersion", rv);
	char *body = cJSON_PrintUnformatted(want);
	cJSON_Delete(want);
	if (have)
		snprintf(path, sizeof path, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies/%s", ns,
			 SBX_NETFLOOR_NAME);
	else
		snprintf(path, sizeof path, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies", ns);
	enum kube_err e = kube_request(k->c->kc, have ? "PUT" : "POST", path, NULL, body, NULL, NULL, err);
	free(body);
	if (e == KUBE_OK)
		log_kv(LOG_INFO, have ? "network floor repaired" : "network floor made", "namespace", ns);
	return e;
}

enum kube_err sbx_netkeep_ensure(struct sbx_controller *c, const char *ns, struct kube_error *err)
{
	struct sbx_netkeep *k = c->netkeep;
	if (!k)
		return KUBE_OK;
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->namespaces);
	struct ns_state *s = ns_entry(k, ns);
	double t = now_s(), made = 0, removed = 0;
	if (s) {
		s->last_pod = t; /* not deleted under a pod about to be made */
		made = s->made;
		removed = s->removed;
	}
	strmap_unlock(k->namespaces);
	pthread_mutex_unlock(&k->mu);
	/* Made by this process a moment ago: the cache may not show it yet
	 * (a second POST would only be answered 409). */
	if (made > 0 && t - made < SBX_NETKEEP_GRACE_S)
		return KUBE_OK;
	/* Removed by this process a moment ago: the cache may still show it. */
	cJSON *have = removed > 0 && t - removed < SBX_NETKEEP_GRACE_S ? NULL
								       : informer_get(k->policies, ns, SBX_NETFLOOR_NAME);
	if (have) {
		cJSON_Delete(have);
		return KUBE_OK;
	}
	enum kube_err e = write_floor(k, ns, NULL, err);
	if (e == KUBE_OK || e == KUBE_ERR_ALREADY_EXISTS) {
		pthread_mutex_lock(&k->mu);
		strmap_lock(k->namespaces);
		if ((s = ns_entry(k, ns)))
			s->made = now_s();
		strmap_unlock(k->namespaces);
		pthread_mutex_unlock(&k->mu);
	}
	return e == KUBE_ERR_ALREADY_EXISTS ? KUBE_OK : e;
}

/* Brings ns's policy to what it should be. */
static void keep_one(struct sbx_netkeep *k, const char *ns, int pods, double last_pod)
{
	cJSON *have = informer_get(k->policies, ns, SBX_NETFLOOR_NAME);
	struct kube_error err = { 0 };
	enum kube_err e = KUBE_OK;
	if (pods > 0 || now_s() - last_pod < SBX_NETKEEP_GRACE_S) {
		cJSON *want = sbx_netfloor_policy(ns, &k->c->cfg->net);
		if (!sbx_netfloor_as_rendered(have, want))
			e = write_floor(k, ns, have, &err);
		cJSON_Delete(want);
	} else if (have) {
		char path[512];
		snprintf(path, sizeof path, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies/%s", ns,
			 SBX_NETFLOOR_NAME);
		e = kube_request(k->c->kc, "DELETE", path, NULL, NULL, NULL, NULL, &err);
		if (e == KUBE_OK) {
			log_kv(LOG_INFO, "network floor removed: no sandbox pod left", "namespace", ns);
			pthread_mutex_lock(&k->mu);
			strmap_lock(k->namespaces);
			struct ns_state *s = ns_entry(k, ns);
			if (s)
				s->removed = now_s();
			strmap_unlock(k->namespaces);
			pthread_mutex_unlock(&k->mu);
		}
		if (e == KUBE_ERR_NOT_FOUND)
			e = KUBE_OK;
	}
	cJSON_Delete(have);
	if (e != KUBE_OK && e != KUBE_ERR_CONFLICT)
		log_kv(LOG_WARN, "keeping the network floor failed", "namespace", ns, "error", err.message);
	if (e != KUBE_OK)
		mark(k, ns); /* again on the next round */
}

/* A namespace to look at, copied out of the map. */
struct todo {
	char ns[64];
	int pods;
	double last_pod;
};
struct collect {
	struct todo *v;
	size_t n, cap;
	int all; /* every namespace (a resync) */
	double now;
};

/* strmap_sweep callback: takes the dirty entries (all of them on a
 * resync), and drops those with no pod, no policy to remove and no
 * recent pod. */
static int take_dirty(const void *value, void *ctx)
{
	struct ns_state *s = (struct ns_state *)value;
	struct collect *col = ctx;
	if (s->dirty || col->all) {
		if (col->n == col->cap) {
			col->cap = col->cap ? col->cap * 2 : 16;
			col->v = xrealloc(col->v, col->cap * sizeof *col->v);
		}
		struct todo *t = &col->v[col->n++];
		memcpy(t->ns, s->ns, sizeof t->ns);
		t->pods = s->pods;
		t->last_pod = s->last_pod;
		s->dirty = 0;
		/* Still wanted until its grace is over: looked at again then. */
		if (s->pods <= 0 && col->now - s->last_pod < SBX_NETKEEP_GRACE_S)
			s->dirty = 1;
	}
	return 0;
}

static void *keeper_main(void *arg)
{
	struct sbx_netkeep *k = arg;
	double next_resync = now_s() + SBX_NETKEEP_RESYNC_S;
	for (;;) {
		pthread_mutex_lock(&k->wake_mu);
		if (!k->stop && !k->kick) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&k->wake, &k->wake_mu, &until);
		}
		int stop = k->stop;
		k->kick = 0;
		pthread_mutex_unlock(&k->wake_mu);
		if (stop)
			break;
		if (!informer_wait_synced(k->policies, 0))
			continue;
		struct collect col = { NULL, 0, 0, 0, now_s() };
		if (col.now >= next_resync) {
			col.all = 1;
			next_resync = col.now + SBX_NETKEEP_RESYNC_S;
		}
		pthread_mutex_lock(&k->mu);
		strmap_lock(k->namespaces);
		strmap_sweep(k->namespaces, take_dirty, &col);
		strmap_unlock(k->namespaces);
		pthread_mutex_unlock(&k->mu);
		for (size_t i = 0; i < col.n; i++)
			keep_one(k, col.v[i].ns, col.v[i].pods, col.v[i].last_pod);
		free(col.v);
	}
	return NULL;
}

int sbx_netkeep_start(struct sbx_controller *c)
{
	static const struct informer_handlers h = { on_policy, on_policy_update, on_policy };
	if (!c->cfg->net.policies)
		return 0;
	struct sbx_netkeep *k = xcalloc(1, sizeof *k);
	k->c = c;
	pthread_mutex_init(&k->mu, NULL);
	pthread_mutex_init(&k->wake_mu, NULL);
	pthread_cond_init(&k->wake, NULL);
	k->namespaces = strmap_new(sizeof(struct ns_state));
	k->pods = strmap_new(sizeof(struct pod_ref));
	k->policies = informer_new(c->kc, "/apis/networking.k8s.io/v1/networkpolicies", SBX_LABEL_NETFLOOR "=true",
				   sbx_netfloor_trim, NULL, &h, k);
	c->netkeep = k;
	if (informer_start(k->policies) < 0 || pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
		k->thread = 0;
		return -1;
	}
	return 0;
}

int sbx_netkeep_synced(struct sbx_controller *c, long timeout_ms)
{
	return !c->netkeep || informer_wait_synced(c->netkeep->policies, timeout_ms);
}

void sbx_netkeep_stop(struct sbx_controller *c)
{
	struct sbx_netkeep *k = c->netkeep;
	if (!k)
		return;
	pthread_mutex_lock(&k->wake_mu);
	k->stop = 1;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->wake_mu);
	if (k->thread)
		pthread_join(k->thread, NULL);
	informer_free(k->policies);
	strmap_free(k->namespaces);
	strmap_free(k->pods);
	pthread_mutex_destroy(&k->mu);
	pthread_mutex_destroy(&k->wake_mu);
	pthread_cond_destroy(&k->wake);
	free(k);
	c->netkeep = NULL;
}
