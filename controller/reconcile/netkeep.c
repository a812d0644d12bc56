#include "reconcile/netkeep.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/state.h"
#include "sandbox/mac.h"
#include "sandbox/netfloor.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/podstate.h"

/* What the keeper knows of one policy: a namespace's floor (key: the
 * namespace) or the policy of a set of profiles in a namespace (hash set;
 * key: set_key). */
struct ns_state {
	char ns[64];
	char hash[17];			      /* "" for the floor */
	char joined[SBX_PROFILES_JOINED_MAX]; /* the set's names ("" until a pod says) */
	int pods;			      /* pods of sandboxes (of the set) in the pod caches */
	int dirty;			      /* to be looked at */
	double made;			      /* when this process last made its policy */
	int writing;			      /* a thread of this process writes its policy now */
	double removed;			      /* when it last removed it */
	double last_pod;		      /* when it last had one (or one was ensured) */
};

/* One pod seen in a pod cache (key: its uid). */
struct pod_ref {
	char ns[64];
	char hash[17]; /* its set of profiles ("" none) */
	int refs;      /* how many pod informers hold it */
};

/* Most addresses of the API server kept (its Service's and endpoints'). */
#define API_ADDRS_MAX 32

struct sbx_netkeep {
	struct sbx_controller *c;
	struct informer *policies;
	pthread_mutex_t mu;	/* guards both maps together, and the addresses */
	pthread_cond_t written; /* with mu: a policy's write ended (claim_write) */
	struct strmap *namespaces, *pods;
	/* The API server's addresses (the kubernetes Service of default and
	 * its endpoints), read at start and on every resync; api_ok 0 until
	 * read: no profile policy is rendered without them. */
	char api[API_ADDRS_MAX][48];
	size_t napi;
	int api_ok;
	int sets; /* set entries made so far: the addresses are read only once there is one */
	pthread_mutex_t wake_mu;
	pthread_cond_t wake;
	int stop, kick;
	int active; /* writes policies: this process runs the workers (the leader) */
	pthread_t thread;
	struct obs_metric *entries; /* sandbox_network_keeper_entries{kind} */
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

/* The map key of the set hash in ns: "p" and 32 hex digits of their
 * SHA-256 (a namespace and a hash together are longer than a key). */
static void set_key(const char *ns, const char *hash, char out[34])
{
	unsigned char md[32];
	unsigned int n = 0;
	char text[96];
	int len = snprintf(text, sizeof text, "%s/%s", ns, hash);
	out[0] = '\0';
	if (len < 0 || EVP_Digest(text, (size_t)len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
		return;
	out[0] = 'p';
	sbx_hex(md, 16, out + 1);
}

/* The map key of the floor of ns (hash NULL or "": ns itself) or of the
 * set hash in ns, in key; NULL for a name that cannot be a namespace's. */
static const char *entry_key(const char *ns, const char *hash, char key[34])
{
	if (strlen(ns) >= sizeof((struct ns_state *)0)->ns || (hash && strlen(hash) != 16 && *hash))
		return NULL;
	if (!hash || !*hash)
		return ns;
	set_key(ns, hash, key);
	return key[0] ? key : NULL;
}

/* The entry of the floor of ns (hash NULL or "") or of the set hash in ns,
 * or NULL (none); k->mu and its map's lock held. */
static struct ns_state *find_entry(struct sbx_netkeep *k, const char *ns, const char *hash)
{
	char buf[34];
	const char *key = entry_key(ns, hash, buf);
	return key ? strmap_get(k->namespaces, key) : NULL;
}

/* The entry of the floor of ns (hash NULL or "") or of the set hash in ns
 * (made when absent); k->mu and its map's lock held. NULL for a name that
 * cannot be a namespace's. */
static struct ns_state *entry_of(struct sbx_netkeep *k, const char *ns, const char *hash)
{
	int created = 0;
	char buf[34];
	const char *key = entry_key(ns, hash, buf);
	if (!key)
		return NULL;
	struct ns_state *s = strmap_put(k->namespaces, key, &created);
	if (s && created) {
		snprintf(s->ns, sizeof s->ns, "%s", ns);
		snprintf(s->hash, sizeof s->hash, "%s", hash ? hash : "");
		/* First heard of now, whether by a pod or a policy: a policy seen
		 * before its pods (another replica made it a moment ago, or this
		 * pod watch lags) gets the grace a pod's would. */
		s->last_pod = now_s();
		if (hash && *hash)
			k->sets++;
	}
	return s;
}

/* Marks the floor of ns (hash NULL) or the set hash in ns to be looked at,
 * its entry made when absent if make; 1 when marked. */
static int mark_entry(struct sbx_netkeep *k, const char *ns, const char *hash, int make)
{
	if (!ns)
		return 0;
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->namespaces);
	struct ns_state *s = make ? entry_of(k, ns, hash) : find_entry(k, ns, hash);
	if (s)
		s->dirty = 1;
	strmap_unlock(k->namespaces);
	pthread_mutex_unlock(&k->mu);
	return s != NULL;
}

static void mark_quietly(struct sbx_netkeep *k, const char *ns, const char *hash)
{
	mark_entry(k, ns, hash, 1);
}

static void mark(struct sbx_netkeep *k, const char *ns, const char *hash)
{
	mark_quietly(k, ns, hash);
	kick(k);
}

/* Marks the entry of (ns, hash) if the keeper has one: a policy that went
 * is nothing to remember. (Made anew with a grace, the entry would have its
 * policy made again and removed again after the grace, round after round.)
 * A namespace with pods under the policy has its entry: it is kept while
 * it counts any. */
static void mark_known(struct sbx_netkeep *k, const char *ns, const char *hash)
{
	if (mark_entry(k, ns, hash, 0))
		kick(k);
}

/* The set of profiles a pod carries: its label's hash when its annotation
 * names a set of that hash (joined filled), else "" (none, or not one the
 * controller wrote: no policy is kept for it). */
static void pod_set(const cJSON *pod, char hash[17], char joined[SBX_PROFILES_JOINED_MAX])
{
	const char *h = label(pod, SBX_LABEL_NETPROFILES), *names_text = annotation(pod, SBX_ANN_NETPROFILES);
	char buf[SBX_PROFILES_JOINED_MAX], check[17];
	const char *names[SBX_PROFILES_MAX];
	int n = h ? sbx_profiles_split(names_text, buf, names) : -1;
	hash[0] = joined[0] = '\0';
	if (n > 0 && sbx_profiles_set(names, (size_t)n, joined, check) == 0 && !strcmp(check, h))
		memcpy(hash, check, sizeof check);
	else
		joined[0] = '\0';
}

void sbx_netkeep_pod(struct sbx_controller *c, const cJSON *pod, int gone)
{
	struct sbx_netkeep *k = c->netkeep;
	const char *uid = meta_str(pod, "uid"), *ns = meta_str(pod, "namespace");
	if (!k || !uid || !ns || strlen(ns) >= sizeof((struct pod_ref *)0)->ns)
		return;
	char hash[17], joined[SBX_PROFILES_JOINED_MAX];
	pod_set(pod, hash, joined);
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->pods);
	strmap_lock(k->namespaces);
	int created = 0, delta = 0;
	struct pod_ref *p = gone ? strmap_get(k->pods, uid) : strmap_put(k->pods, uid, &created);
	if (p && !gone) {
		if (created) {
			snprintf(p->ns, sizeof p->ns, "%s", ns);
			memcpy(p->hash, hash, sizeof p->hash);
			delta = 1;
		}
		p->refs++;
	} else if (p && --p->refs <= 0) {
		memcpy(hash, p->hash, sizeof p->hash); /* the set it was counted in */
		strmap_del(k->pods, uid);
		delta = -1;
	}
	for (int set = 0; set < 2; set++) {
		if (set && !hash[0])
			break;
		struct ns_state *s = entry_of(k, ns, set ? hash : NULL);
		if (!s)
			continue;
		s->pods += delta;
		s->last_pod = now_s();
		if (set && joined[0] && !s->joined[0])
			memcpy(s->joined, joined, sizeof s->joined);
		if (delta)
			s->dirty = 1;
	}
	strmap_unlock(k->namespaces);
	strmap_unlock(k->pods);
	pthread_mutex_unlock(&k->mu);
	if (delta)
		kick(k);
}

/* The set hash of a policy of the keeper's (NULL for a floor) in *hash;
 * -1 for one it does not render. */
static int policy_set(const cJSON *obj, const char **hash)
{
	const char *floor = label(obj, SBX_LABEL_NETFLOOR), *h = label(obj, SBX_LABEL_NETPROFILES);
	int is_set = floor && !strcmp(floor, SBX_NETFLOOR_PROFILES);
	if (is_set && (!h || strlen(h) != 16 || strspn(h, "0123456789abcdef") != 16))
		return -1;
	*hash = is_set ? h : NULL;
	return 0;
}

/* A policy of the keeper's came or changed: its floor or set is looked at
 * (a set no pod names any more is removed). */
static void on_policy(void *ctx, const cJSON *obj)
{
	const char *hash;
	if (policy_set(obj, &hash) == 0)
		mark(ctx, meta_str(obj, "namespace"), hash);
}

static void on_policy_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	(void)old_obj;
	on_policy(ctx, new_obj);
}

/* A policy of the keeper's went: looked at if the keeper knows it (made
 * again while its namespace has pods under it). */
static void on_policy_gone(void *ctx, const cJSON *obj)
{
	const char *hash;
	if (policy_set(obj, &hash) == 0)
		mark_known(ctx, meta_str(obj, "namespace"), hash);
}

/* Reads the API server's addresses: the clusterIPs of default/kubernetes
 * and the addresses of its endpoints. 0, or -1 (nothing changed). */
static int refresh_api(struct sbx_netkeep *k)
{
	char got[API_ADDRS_MAX][48];
	size_t n = 0;
	cJSON *svc = NULL, *ep = NULL;
	struct kube_error err = { 0 };
	enum kube_err e = kube_request(k->c->kc, "GET", "/api/v1/namespaces/default/services/kubernetes", NULL, NULL,
				       NULL, &svc, &err);
	/* No Endpoints (an API server whose endpoint reconciler is off, as the
	 * local control plane's): no endpoint is published, the Service's
	 * addresses are what there is. */
	enum kube_err ee = e != KUBE_OK ? e
					: kube_request(k->c->kc, "GET", "/api/v1/namespaces/default/endpoints/kubernetes",
						       NULL, NULL, NULL, &ep, &err);
	if (e != KUBE_OK || (ee != KUBE_OK && ee != KUBE_ERR_NOT_FOUND)) {
		log_kv(LOG_WARN, "cannot read the API server's addresses: no profile policy is made until they are known",
		       "error", err.message);
		cJSON_Delete(svc);
		return -1;
	}
	const cJSON *v, *subset, *addr;
	cJSON_ArrayForEach(v, jobj(jobj(svc, "spec"), "clusterIPs")) if (cJSON_IsString(v) && n < API_ADDRS_MAX &&
									 strlen(v->valuestring) < sizeof got[0])
	    snprintf(got[n++], sizeof got[0], "%s", v->valuestring);
	cJSON_ArrayForEach(subset, jobj(ep, "subsets")) cJSON_ArrayForEach(addr, jobj(subset, "addresses"))
	{
		const char *ip = jstr(addr, "ip");
		if (ip && n < API_ADDRS_MAX && strlen(ip) < sizeof got[0])
			snprintf(got[n++], sizeof got[0], "%s", ip);
	}
	cJSON_Delete(svc);
	cJSON_Delete(ep);
	pthread_mutex_lock(&k->mu);
	int changed = !k->api_ok || n != k->napi || memcmp(got, k->api, n * sizeof got[0]);
	memcpy(k->api, got, n * sizeof got[0]);
	k->napi = n;
	k->api_ok = 1;
	pthread_mutex_unlock(&k->mu);
	if (changed)
		sbx_netkeep_profiles_changed(k->c);
	return 0;
}

/* The profile policy of the set (joined, hash) in ns as it should be (new;
 * caller frees), or NULL while the API server's addresses are not known. */
static cJSON *render_set(struct sbx_netkeep *k, const char *ns, const char *joined, const char *hash)
{
	char buf[SBX_PROFILES_JOINED_MAX];
	const char *names[SBX_PROFILES_MAX];
	int n = sbx_profiles_split(joined, buf, names);
	const char *api[API_ADDRS_MAX];
	struct sbx_cidr floor[SBX_NETPROFILE_FLOOR_MAX];
	char api_copy[API_ADDRS_MAX][48];
	pthread_mutex_lock(&k->mu);
	int ok = k->api_ok;
	size_t napi = k->napi;
	memcpy(api_copy, k->api, sizeof api_copy);
	pthread_mutex_unlock(&k->mu);
	if (!ok || n < 1)
		return NULL;
	for (size_t i = 0; i < napi; i++)
		api[i] = api_copy[i];
	size_t nfloor = sbx_netprofile_floor(&k->c->cfg->net, api, napi, floor, SBX_NETPROFILE_FLOOR_MAX);
	cJSON *profiles[SBX_PROFILES_MAX] = { 0 };
	for (int i = 0; i < n; i++)
		profiles[i] = k->c->profiles ? informer_get(k->c->profiles, NULL, names[i]) : NULL;
	cJSON *want = sbx_netprofile_policy(ns, joined, hash, (const cJSON *const *)profiles, (size_t)n, floor, nfloor);
	for (int i = 0; i < n; i++)
		cJSON_Delete(profiles[i]);
	return want;
}

/* The API path of the NetworkPolicies of ns, or of the one named name
 * (NULL: the collection), into out (n bytes). */
static void policy_path(char *out, size_t n, const char *ns, const char *name)
{
	if (name)
		snprintf(out, n, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies/%s", ns, name);
	else
		snprintf(out, n, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies", ns);
}

/* Writes want (the floor of ns, or a set's policy; taken) as the policy
 * name: POST when have is NULL, else PUT over have. */
static enum kube_err write_policy(struct sbx_netkeep *k, const char *ns, const char *name, cJSON *want,
				  const cJSON *have, struct kube_error *err)
{
	char path[512];
	const char *rv = have ? meta_str(have, "resourceVersion") : NULL;
	if (rv)
		cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(want, "metadata"), "resourceVersion", rv);
	char *body = cJSON_PrintUnformatted(want);
	cJSON_Delete(want);
	policy_path(path, sizeof path, ns, have ? name : NULL);
	fault_delay("policy-write"); /* tests: a slow answer, while others look */
	enum kube_err e = kube_request(k->c->kc, have ? "PUT" : "POST", path, NULL, body, NULL, NULL, err);
	free(body);
	if (e == KUBE_OK && !strcmp(name, SBX_NETFLOOR_NAME))
		log_kv(LOG_INFO, have ? "network floor repaired" : "network floor made", "namespace", ns);
	else if (e == KUBE_OK)
		log_kv(LOG_INFO, have ? "profile policy repaired" : "profile policy made", "namespace", ns, "policy", name);
	return e;
}

/* 1 when the policy p (as cached or read) is being deleted: it is no floor,
 * and a write over it that leaves it without finalizers deletes it. */
static int going(const cJSON *p)
{
	return jstr(jobj(p, "metadata"), "deletionTimestamp") != NULL;
}

/* Makes want (taken) the policy name of ns: a POST; when the name is taken
 * by a policy that is not the controller's (no sandbox.dev/network-floor
 * label: one made before admission refused tenants the name, or by an
 * administrator), a PUT over it. The name is the floor's: a pod must never
 * be made under a policy that only has its name. KUBE_OK also when a policy
 * of the controller had the name already (another replica's; the keeper
 * renders it again if it must); KUBE_ERR_CONFLICT while the policy under
 * the name is being deleted (held by a finalizer: a write over it would
 * complete its deletion and leave the namespace without its floor). */
static enum kube_err make_policy(struct sbx_netkeep *k, const char *ns, const char *name, cJSON *want,
				 struct kube_error *err)
{
	cJSON *again = cJSON_Duplicate(want, 1);
	enum kube_err e = write_policy(k, ns, name, want, NULL, err);
	if (e == KUBE_ERR_ALREADY_EXISTS) {
		char path[512];
		policy_path(path, sizeof path, ns, name);
		cJSON *have = NULL;
		e = kube_request(k->c->kc, "GET", path, NULL, NULL, NULL, &have, err);
		const char *l = jstr(jobj(jobj(have, "metadata"), "labels"), SBX_LABEL_NETFLOOR);
		if (e == KUBE_OK && going(have)) {
			e = KUBE_ERR_CONFLICT;
			kube_error_set(err, e,
				       "the NetworkPolicy %s of namespace %s is being deleted (held by its finalizers): "
				       "written once it is gone",
				       name, ns);
		} else if (e == KUBE_OK && !(l && !strcmp(l, "true"))) {
			log_kv(LOG_WARN, "a policy not the controller's had the network floor's name: written over",
			       "namespace", ns, "policy", name);
			e = write_policy(k, ns, name, again, have, err);
			again = NULL;
		} else if (e == KUBE_ERR_NOT_FOUND) {
			e = KUBE_ERR_CONFLICT; /* gone meanwhile: made on the next try */
			kube_error_set(err, e, "%s", "the policy's name was taken, then freed: trying again");
		}
		cJSON_Delete(have);
	}
	cJSON_Delete(again);
	return e;
}

/* The name of the policy of the floor (hash "") or of a set. */
static void policy_name(const char *hash, char out[64])
{
	if (hash[0])
		sbx_netprofile_policy_name(hash, out);
	else
		snprintf(out, 64, "%s", SBX_NETFLOOR_NAME);
}

/* The policy of the floor of ns or of the set (joined, hash) as it should
 * be (new; caller frees), or NULL when it cannot be rendered now. */
static cJSON *render(struct sbx_netkeep *k, const char *ns, const char *hash, const char *joined)
{
	return hash[0] ? render_set(k, ns, joined, hash) : sbx_netfloor_policy(ns, &k->c->cfg->net);
}

/* Whether this process did something to a policy at when (0: never) less
 * than SBX_NETKEEP_GRACE_S before now: its cache may not show it yet. */
static int just_done(double when, double now)
{
	return when > 0 && now - when < SBX_NETKEEP_GRACE_S;
}

/* Claims the write of the policy of (ns, hash) for this thread, waiting
 * while another thread of this process has it: one POST goes out, and the
 * threads that waited find it made rather than send their own, which would
 * only be answered 409; nor is it deleted while a pod is ensured its floor.
 * *now receives the entry as it is once claimed. Returns 1 when claimed
 * (release_write then), 0 for a name that cannot be a namespace's. */
static int claim_write(struct sbx_netkeep *k, const char *ns, const char *hash, struct ns_state *now)
{
	int claimed = 0;
	memset(now, 0, sizeof *now);
	pthread_mutex_lock(&k->mu);
	for (;;) {
		strmap_lock(k->namespaces);
		struct ns_state *s = entry_of(k, ns, hash);
		int busy = s && s->writing;
		if (s && !busy) {
			s->writing = 1;
			*now = *s;
			claimed = 1;
		}
		strmap_unlock(k->namespaces);
		if (!busy)
			break;
		pthread_cond_wait(&k->written, &k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return claimed;
}

/* What a thread did to a policy under its claim: the cache may not show
 * it for a moment (just_done). */
enum written { WROTE_NOTHING,
	       WROTE_MADE,
	       WROTE_REMOVED };

/* Ends claim_write's claim, noting what this thread did. */
static void release_write(struct sbx_netkeep *k, const char *ns, const char *hash, enum written did)
{
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->namespaces);
	struct ns_state *s = entry_of(k, ns, hash);
	if (s) {
		s->writing = 0;
		if (did == WROTE_MADE)
			s->made = now_s();
		else if (did == WROTE_REMOVED)
			s->removed = now_s();
	}
	strmap_unlock(k->namespaces);
	pthread_cond_broadcast(&k->written);
	pthread_mutex_unlock(&k->mu);
}

/* Whether the policy name of ns is there, as this process knows at now:
 * made by it a moment ago (the cache may not show it yet, and a second POST
 * would only be answered 409), else in the cache unless this process
 * removed it a moment ago (the cache may still show it). */
static int present(struct sbx_netkeep *k, const char *ns, const char *name, double made, double removed, double now)
{
	if (just_done(made, now))
		return 1;
	if (just_done(removed, now))
		return 0;
	cJSON *have = informer_get(k->policies, ns, name);
	int there = have && !going(have);
	cJSON_Delete(have);
	return there;
}

/* sbx_netkeep_ensure for the floor of ns (hash "") or a set of ns. */
static enum kube_err ensure_one(struct sbx_netkeep *k, const char *ns, const char *hash, const char *joined,
				struct kube_error *err)
{
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->namespaces);
	struct ns_state *s = entry_of(k, ns, hash);
	double t = now_s(), made = 0, removed = 0;
	int writing = 0;
	if (s) {
		s->last_pod = t; /* not deleted under a pod about to be made */
		made = s->made;
		removed = s->removed;
		writing = s->writing;
		if (hash[0] && !s->joined[0])
			snprintf(s->joined, sizeof s->joined, "%s", joined);
	}
	strmap_unlock(k->namespaces);
	pthread_mutex_unlock(&k->mu);
	char name[64];
	policy_name(hash, name);
	if (!writing && present(k, ns, name, made, removed, t))
		return KUBE_OK;
	pthread_mutex_lock(&k->mu);
	int api_ok = k->api_ok;
	pthread_mutex_unlock(&k->mu);
	if (hash[0] && !api_ok)
		refresh_api(k); /* the first set: read them now rather than on the keeper's next round */
	/* Written by another thread meanwhile (made, or removed: the keeper
	 * had seen no pod): looked at again once it is done. */
	struct ns_state now;
	int claimed = claim_write(k, ns, hash, &now);
	if (claimed && present(k, ns, name, now.made, now.removed, now_s())) {
		release_write(k, ns, hash, WROTE_NOTHING);
		return KUBE_OK;
	}
	cJSON *want = render(k, ns, hash, joined);
	enum kube_err e = KUBE_ERR_OTHER;
	if (want)
		e = make_policy(k, ns, name, want, err);
	else
		kube_error_set(err, KUBE_ERR_OTHER, "%s",
			       "the network profiles' policy cannot be made yet: the API server's addresses (the "
			       "kubernetes Service of default and its endpoints), which it must except, are not known");
	if (claimed)
		release_write(k, ns, hash, e == KUBE_OK ? WROTE_MADE : WROTE_NOTHING);
	return e;
}

enum kube_err sbx_netkeep_ensure(struct sbx_controller *c, const char *ns, struct kube_error *err)
{
	return c->netkeep ? ensure_one(c->netkeep, ns, "", "", err) : KUBE_OK;
}

enum kube_err sbx_netkeep_ensure_profiles(struct sbx_controller *c, const char *ns, const cJSON *spec,
					  struct kube_error *err)
{
	const char *names[SBX_PROFILES_MAX];
	size_t n = 0;
	char msg[256], joined[SBX_PROFILES_JOINED_MAX], hash[17];
	if (!c->netkeep)
		return KUBE_OK;
	if (sbx_spec_profiles(spec, names, &n, msg, sizeof msg) < 0 ||
	    (n && sbx_profiles_set(names, n, joined, hash) < 0)) {
		kube_error_set(err, KUBE_ERR_OTHER, "%s", msg);
		return KUBE_ERR_OTHER;
	}
	return n ? ensure_one(c->netkeep, ns, hash, joined, err) : KUBE_OK;
}

/* strmap_sweep callback: marks every set's entry. */
static int mark_set(const void *value, void *ctx)
{
	struct ns_state *s = (struct ns_state *)value;
	(void)ctx;
	if (s->hash[0])
		s->dirty = 1;
	return 0;
}

void sbx_netkeep_profiles_changed(struct sbx_controller *c)
{
	struct sbx_netkeep *k = c->netkeep;
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	strmap_lock(k->namespaces);
	strmap_sweep(k->namespaces, mark_set, NULL);
	strmap_unlock(k->namespaces);
	pthread_mutex_unlock(&k->mu);
	kick(k);
}

/* A policy to look at, copied out of the map. */
struct todo {
	char ns[64];
	char hash[17];
};

/* Whether ns has, read live, a pod the policy of (ns, hash) selects that is
 * neither going nor finished: 1, 0, or -1 (err says why) when it cannot be
 * read. The keeper counts pods from the pod caches, which may not have
 * seen a pod made a moment ago; before a policy is removed the API server is
 * asked. A page that ends with more to read counts as a pod (kept). */
static int pods_live(struct sbx_netkeep *k, const char *ns, const char *hash, struct kube_error *err)
{
	char path[512], sel[128];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
	if (hash[0])
		snprintf(sel, sizeof sel, "%s=%s", SBX_LABEL_NETPROFILES, hash);
	else
		snprintf(sel, sizeof sel, "%s=%s", SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	const char *q[] = { "labelSelector", sel, "limit", "50", NULL };
	cJSON *list = NULL;
	if (kube_request(k->c->kc, "GET", path, q, NULL, NULL, &list, err) != KUBE_OK)
		return -1;
	int any = jstr(jobj(list, "metadata"), "continue") != NULL;
	const cJSON *p;
	cJSON_ArrayForEach(p, jobj(list, "items"))
	{
		if (!meta_str(p, "deletionTimestamp") && !sbx_pod_finished(p))
			any = 1;
	}
	cJSON_Delete(list);
	return any;
}

/* Brings the floor's or a set's policy to what it should be. */
static void keep_one(struct sbx_netkeep *k, const struct todo *t)
{
	char name[64];
	policy_name(t->hash, name);
	/* As it is now, not as collected: a reconcile may have ensured a pod
	 * its floor (last_pod) or made the policy (made) since. Every entry
	 * the keeper collects has a namespace's name: it is claimed. */
	struct ns_state now;
	if (!claim_write(k, t->ns, t->hash, &now))
		return;
	enum written did = WROTE_NOTHING;
	int live;
	cJSON *have = informer_get(k->policies, t->ns, name);
	struct kube_error err = { 0 };
	enum kube_err e = KUBE_OK;
	if (!have && just_done(now.made, now_s())) {
		/* Made by this process a moment ago (sbx_netkeep_ensure) and not in
		 * the cache yet: a POST now would only be answered 409. Looked at
		 * again on the next round. */
		release_write(k, t->ns, t->hash, WROTE_NOTHING);
		mark_quietly(k, t->ns, t->hash);
		return;
	}
	if (now.pods > 0 || now_s() - now.last_pod < SBX_NETKEEP_GRACE_S) {
		/* Not renderable now (a set's before the API server's addresses
		 * are known): marked again when they are. */
		cJSON *want = have && going(have) ? NULL : render(k, t->ns, t->hash, now.joined);
		if (have && going(have)) {
			e = KUBE_ERR_CONFLICT; /* made once it is gone (make_policy) */
		} else if (want && !sbx_netfloor_as_rendered(have, want)) {
			e = have ? write_policy(k, t->ns, name, want, have, &err) : make_policy(k, t->ns, name, want, &err);
			did = e == KUBE_OK && !have ? WROTE_MADE : WROTE_NOTHING;
		} else {
			cJSON_Delete(want);
		}
	} else if (have && going(have)) {
		e = KUBE_OK; /* on its way already */
	} else if (have && (live = pods_live(k, t->ns, t->hash, &err)) != 0) {
		/* The caches have not seen a pod the API server has (its
		 * creation's event is on its way): kept, looked at again. */
		e = live < 0 ? KUBE_ERR_OTHER : KUBE_ERR_CONFLICT;
	} else if (have) {
		char path[512];
		policy_path(path, sizeof path, t->ns, name);
		e = kube_request(k->c->kc, "DELETE", path, NULL, NULL, NULL, NULL, &err);
		if (e == KUBE_OK) {
			log_kv(LOG_INFO, t->hash[0] ? "profile policy removed: no sandbox pod of its profiles left" : "network floor removed: no sandbox pod left",
			       "namespace", t->ns, "policy", name);
			did = WROTE_REMOVED;
		}
		if (e == KUBE_ERR_NOT_FOUND)
			e = KUBE_OK;
	}
	cJSON_Delete(have);
	release_write(k, t->ns, t->hash, did);
	if (e != KUBE_OK && e != KUBE_ERR_CONFLICT)
		log_kv(LOG_WARN, "keeping the network floor failed", "namespace", t->ns, "policy", name, "error",
		       err.message);
	if (e != KUBE_OK)
		mark_quietly(k, t->ns, t->hash); /* again on the next round, a second away (a kick would be now) */
}

/* A namespace to look at, copied out of the map. */
struct collect {
	struct sbx_netkeep *k;
	int active; /* this process writes policies: dirty entries are taken */
	struct todo *v;
	size_t n, cap;
	int all; /* every namespace (a resync) */
	double now;
	long floors, sets; /* the entries kept, counted on the way */
};

/* Whether the keeper may forget s (k->mu and the map's lock held): no pod
 * counted under it, none within its grace, no write of its policy by this
 * process under way or just made, and its policy not in the cache (the
 * leader removed it, or never made it). Everything else it holds is
 * derived: a pod or a policy of it seen later makes the entry again, with
 * a grace of its own (entry_of). So a controller serving short-lived
 * namespaces does not grow by one for each it ever saw. */
static int forgettable(struct sbx_netkeep *k, const struct ns_state *s, double now)
{
	if (s->pods > 0 || s->writing || now - s->last_pod < SBX_NETKEEP_GRACE_S || just_done(s->made, now))
		return 0;
	char name[64];
	policy_name(s->hash, name);
	cJSON *have = informer_get(k->policies, s->ns, name);
	cJSON_Delete(have);
	return have == NULL;
}

/* strmap_sweep callback: forgets the entries there is nothing left to do
 * for (in every process: a standby counts pods too), then, in the leader,
 * takes the dirty entries (all of them on a resync). */
static int take_dirty(const void *value, void *ctx)
{
	struct ns_state *s = (struct ns_state *)value;
	struct collect *col = ctx;
	if (forgettable(col->k, s, col->now)) {
		if (s->hash[0])
			col->k->sets--;
		return 1;
	}
	if (s->hash[0])
		col->sets++;
	else
		col->floors++;
	if (col->active && (s->dirty || col->all)) {
		if (col->n == col->cap) {
			col->cap = col->cap ? col->cap * 2 : 16;
			col->v = xrealloc(col->v, col->cap * sizeof *col->v);
		}
		struct todo *t = &col->v[col->n++];
		memcpy(t->ns, s->ns, sizeof t->ns);
		memcpy(t->hash, s->hash, sizeof t->hash);
		s->dirty = 0;
		/* Still wanted until its grace is over: looked at again then. */
		if (s->pods <= 0 && col->now - s->last_pod < SBX_NETKEEP_GRACE_S)
			s->dirty = 1;
	}
	return 0;
}

/* Whether every pod cache that counts sandbox pods for the keeper (the
 * Sandboxes', the pools' and the folder preparations') has told it of its
 * whole first LIST. Before that a namespace's count says nothing: a
 * restarted process would see its floors and no pod under them, and take
 * them away from running pods until their caches caught up. */
static int pods_told(struct sbx_controller *c)
{
	pthread_mutex_lock(&c->informers_mu);
	int told = c->pods && c->pool_pods && c->prep_pods && informer_delivered(c->pods) &&
		   informer_delivered(c->pool_pods) && informer_delivered(c->prep_pods);
	pthread_mutex_unlock(&c->informers_mu);
	return told;
}

static void *keeper_main(void *arg)
{
	struct sbx_netkeep *k = arg;
	double next_resync = now_s() + SBX_NETKEEP_RESYNC_S, next_api = 0;
	for (;;) {
		pthread_mutex_lock(&k->wake_mu);
		if (!k->stop && !k->kick) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&k->wake, &k->wake_mu, &until);
		}
		int stop = k->stop, active = k->active;
		k->kick = 0;
		pthread_mutex_unlock(&k->wake_mu);
		if (stop)
			break;
		if (!informer_wait_synced(k->policies, 0) || !pods_told(k->c))
			continue;
		struct collect col = { k, active, NULL, 0, 0, 0, now_s(), 0, 0 };
		if (active && col.now >= next_resync) {
			col.all = 1;
			next_resync = col.now + SBX_NETKEEP_RESYNC_S;
		}
		/* The API server's addresses, once a set of profiles is kept (none
		 * otherwise: a cluster without profiles pays no request): on every
		 * resync, every 10 s until first read. */
		pthread_mutex_lock(&k->mu);
		int sets = k->sets;
		pthread_mutex_unlock(&k->mu);
		if (active && sets && col.now >= next_api)
			next_api = col.now + (refresh_api(k) == 0 ? SBX_NETKEEP_RESYNC_S : 10);
		pthread_mutex_lock(&k->mu);
		strmap_lock(k->namespaces);
		strmap_sweep(k->namespaces, take_dirty, &col);
		strmap_unlock(k->namespaces);
		pthread_mutex_unlock(&k->mu);
		obs_metric_set(k->entries, (const char *const[]){ "floor" }, (double)col.floors);
		obs_metric_set(k->entries, (const char *const[]){ "profiles" }, (double)col.sets);
		for (size_t i = 0; i < col.n; i++)
			keep_one(k, &col.v[i]);
		free(col.v);
	}
	return NULL;
}

int sbx_netkeep_start(struct sbx_controller *c)
{
	static const struct informer_handlers h = { on_policy, on_policy_update, on_policy_gone };
	if (!c->cfg->net.policies)
		return 0;
	struct sbx_netkeep *k = xcalloc(1, sizeof *k);
	k->c = c;
	pthread_mutex_init(&k->mu, NULL);
	pthread_mutex_init(&k->wake_mu, NULL);
	pthread_cond_init(&k->wake, NULL);
	pthread_cond_init(&k->written, NULL);
	k->namespaces = strmap_new(sizeof(struct ns_state));
	k->pods = strmap_new(sizeof(struct pod_ref));
	k->entries = obs_gauge("sandbox_network_keeper_entries",
			       "Policies the network keeper tracks (every replica; the leader writes them): a floor "
			       "per namespace, a policy per namespace and set of allow profiles, while it has "
			       "sandbox pods or within their grace.",
			       "kind");
	obs_metric_set(k->entries, (const char *const[]){ "floor" }, 0);
	obs_metric_set(k->entries, (const char *const[]){ "profiles" }, 0);
	k->policies = informer_new(c->kc, "/apis/networking.k8s.io/v1/networkpolicies", SBX_LABEL_NETFLOOR,
				   sbx_netfloor_trim, NULL, &h, k);
	c->netkeep = k;
	if (informer_start(k->policies) < 0 || pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
		k->thread = 0;
		return -1;
	}
	return 0;
}

void sbx_netkeep_activate(struct sbx_controller *c)
{
	struct sbx_netkeep *k = c->netkeep;
	if (!k)
		return;
	pthread_mutex_lock(&k->wake_mu);
	k->active = 1;
	pthread_mutex_unlock(&k->wake_mu);
	kick(k);
}

int sbx_netkeep_synced(struct sbx_controller *c, long timeout_ms)
{
	return !c->netkeep || informer_wait_synced(c->netkeep->policies, timeout_ms);
}

void sbx_netkeep_request_stop(struct sbx_controller *c)
{
	if (c->netkeep && c->netkeep->policies)
		informer_request_stop(c->netkeep->policies);
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
	pthread_cond_destroy(&k->written);
	free(k);
	c->netkeep = NULL;
}
