/* The controller's side of the workspace preparation (reconcile/wsgate.h,
 * sandbox/wsprep.h):
 * before a pod of an owner is created (cold, resumed, warm), the owner's
 * preparation pod in that namespace has Succeeded.
 *
 * Idempotent across replicas and crashes: the pod's name is derived from
 * what it prepares, so the create is the claim (AlreadyExists is the same
 * pod, read from the cache and checked). A Succeeded pod is the record that
 * the folders are ready while the Sandbox or pool it was made for lives (it
 * owns the pod; the garbage collector takes it with it, and the next one that
 * needs the folders makes it again: workspace-init then finds them ready).
 *
 * Event-driven and cheap: the preparation pods are watched (an informer on
 * their label), so a waiting Sandbox costs no request: it is parked and
 * queued again when its preparation pod is done, failed or gone (a timer
 * looks again when it has waited REPORT_MS). One worker creates the pod; the
 * others wait for it.
 *
 * Bounded: the pod's activeDeadlineSeconds, and a pod neither done nor
 * failed after that and a minute is deleted and made again; a failed one
 * too. The Sandbox says Waiting, with the pod's state, when the create was
 * refused, the pod failed, or it has waited REPORT_MS: a preparation that
 * takes its ordinary few seconds costs no status write. A replica remembers a
 * Succeeded pod for PREPARED_MS, then reads the cache again. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "reconcile/wsgate.h"

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/xmalloc.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "reconcile/netkeep.h"
#include "reconcile/state.h"
#include "reconcile/strset.h"
#include "reconcile/writes.h"
#include "sandbox/podstate.h"
#include "sandbox/wsprep.h"

/* An owner known prepared is looked at again after this long. */
#define PREPARED_MS (10 * 60 * 1000)
/* A worker creating a preparation pod holds it this long for the others (its
 * watch event normally ends it sooner). */
#define CREATING_MS 10000
/* A wait this long is said on the Sandbox; a parked Sandbox looks again
 * then if no event came. */
#define REPORT_MS 60000

/* Who waits for which preparation pod: "<pod name> <kind> <queue key>" (a
 * work queue item). */
struct waiter {
	char *k;
	char *flow; /* its work queue flow: the owner */
	UT_hash_handle hh;
};

struct sbx_ws_waiters {
	pthread_mutex_t mu;
	struct waiter *h;
};

struct sbx_ws_waiters *sbx_ws_waiters_new(void)
{
	struct sbx_ws_waiters *w = xcalloc(1, sizeof *w);
	pthread_mutex_init(&w->mu, NULL);
	return w;
}

void sbx_ws_waiters_free(struct sbx_ws_waiters *w)
{
	if (!w)
		return;
	struct waiter *x, *tmp;
	HASH_ITER(hh, w->h, x, tmp)
	{
		HASH_DEL(w->h, x);
		free(x->k);
		free(x->flow);
		free(x);
	}
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* Parks the item kind/queue_key of owner's flow on pod name until it is done
 * (park 1; once per pair), or unparks it (park 0: it goes on by itself). */
static void park(struct sbx_controller *c, const char *name, int kind, const char *queue_key, const char *owner,
		 int on)
{
	if (!queue_key)
		return;
	char *k = xasprintf("%s %d %s", name, kind, queue_key);
	struct waiter *x;
	pthread_mutex_lock(&c->prep_waiters->mu);
	HASH_FIND_STR(c->prep_waiters->h, k, x);
	if (on && !x) {
		x = xcalloc(1, sizeof *x);
		x->k = k;
		x->flow = xstrdup(owner);
		HASH_ADD_KEYPTR(hh, c->prep_waiters->h, x->k, strlen(x->k), x);
		k = NULL;
		x = NULL;
	} else if (!on && x) {
		HASH_DEL(c->prep_waiters->h, x);
	} else {
		x = NULL;
	}
	pthread_mutex_unlock(&c->prep_waiters->mu);
	if (x) {
		free(x->k);
		free(x->flow);
	}
	free(x);
	free(k);
}

/* Queues again every item parked on pod name. */
static void wake(struct sbx_controller *c, const char *name)
{
	size_t n = strlen(name);
	struct waiter *x, *tmp, *woken = NULL;
	pthread_mutex_lock(&c->prep_waiters->mu);
	HASH_ITER(hh, c->prep_waiters->h, x, tmp)
	{
		if (!strncmp(x->k, name, n) && x->k[n] == ' ') {
			HASH_DEL(c->prep_waiters->h, x);
			HASH_ADD_KEYPTR(hh, woken, x->k, strlen(x->k), x);
		}
	}
	pthread_mutex_unlock(&c->prep_waiters->mu);
	HASH_ITER(hh, woken, x, tmp)
	{
		HASH_DEL(woken, x);
		char *end = NULL;
		long kind = strtol(x->k + n + 1, &end, 10);
		if (end && *end == ' ')
			workqueue_add_flow(c->queue, (int)kind, end + 1, x->flow);
		free(x->k);
		free(x->flow);
		free(x);
	}
}

void sbx_ws_on_prep_pod(struct sbx_controller *c, const cJSON *pod, int deleted)
{
	const char *name = meta_str(pod, "name");
	if (!name)
		return;
	sbx_strset_del(c->prep_looked, name); /* its create is done: no longer held */
	if (deleted || sbx_pod_finished(pod))
		wake(c, name);
}

void sbx_controller_set_prep_image(struct sbx_controller *c, const char *image)
{
	snprintf(c->prep_image, sizeof c->prep_image, "%s", image && *image ? image : "");
}

/* The image preparation pods run: the config's, else the controller's own. */
const char *sbx_controller_prep_image(const struct sbx_controller *c)
{
	if (c->cfg->prep_image)
		return c->cfg->prep_image;
	return c->prep_image[0] ? c->prep_image : SBX_WSPREP_DEFAULT_IMAGE;
}

int sbx_controller_own_image(struct kube_client *kc, char *out, size_t n, char *err, size_t errlen)
{
	const char *ns = getenv("POD_NAMESPACE"), *name = getenv("POD_NAME");
	if (!ns || !*ns || !name || !*name) {
		snprintf(err, errlen, "POD_NAMESPACE and POD_NAME are not set");
		return -1;
	}
	char path[600];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
	cJSON *pod = NULL;
	struct kube_error e;
	if (kube_request(kc, "GET", path, NULL, NULL, NULL, &pod, &e) != KUBE_OK) {
		snprintf(err, errlen, "reading its own pod %s/%s: %s", ns, name, e.message);
		return -1;
	}
	const char *image = NULL;
	const cJSON *ctr;
	cJSON_ArrayForEach(ctr, jobj(jobj(pod, "spec"), "containers"))
	{
		const char *cn = jstr(ctr, "name");
		if (!image || (cn && !strcmp(cn, "manager")))
			image = jstr(ctr, "image");
	}
	int rc = image && *image && strlen(image) < n ? 0 : -1;
	if (rc == 0)
		snprintf(out, n, "%s", image);
	else
		snprintf(err, errlen, "its own pod %s/%s names no usable image", ns, name);
	cJSON_Delete(pod);
	return rc;
}

/* Creates the preparation pod name of owner in ns: 0 when it was made or is
 * there (a lost answer is read back), or -1 with why in w. */
static int create_prep(struct sbx_controller *c, const char *ns, const char *owner, const char *name,
		       const struct sbx_wsprep_for *forobj, struct sbx_ws_wait *w)
{
	struct kube_error err;
	if (sbx_netkeep_ensure(c, ns, &err) != KUBE_OK) { /* never a pod without its floor */
		snprintf(w->why, sizeof w->why, "the network floor of namespace %s cannot be made: %s", ns,
			 err.message);
		return -1;
	}
	cJSON *pod = sbx_wsprep_pod(ns, owner, c->cfg, sbx_controller_prep_image(c), forobj);
	if (!pod) {
		snprintf(w->why, sizeof w->why,
			 "the workspace folders of owner %s cannot be prepared: check the controller's workspace config",
			 owner);
		return -1;
	}
	char *body = cJSON_PrintUnformatted(pod), path[512];
	cJSON_Delete(pod);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, NULL, &err);
	free(body);
	if (e == KUBE_OK) {
		log_kv(LOG_INFO, "preparing workspace folders", "namespace", ns, "owner", owner, "pod", name);
		return 0;
	}
	if (e == KUBE_ERR_ALREADY_EXISTS)
		return 0;
	if (kube_err_retriable(e)) {
		/* The outcome is unknown: the pod is read back. */
		cJSON *got = NULL;
		int found = sbx_rc_get_pod(c, ns, name, &got) == 0 && got;
		cJSON_Delete(got);
		if (found)
			return 0;
	}
	sbx_rc_log_create_failure(ns, forobj->name, name, e, err.message);
	snprintf(w->why, sizeof w->why,
		 "creating pod %s, which prepares the workspace folders of owner %s, failed (%s): %s; retrying", name,
		 owner, kube_err_str(e), err.message);
	w->retry_after_ms = (long)err.retry_after_s * 1000;
	return -1;
}

int sbx_ws_prepared(struct sbx_controller *c, const char *ns, const char *owner,
		    const struct sbx_wsprep_for *forobj, int kind, const char *queue_key, struct sbx_ws_wait *w)
{
	memset(w, 0, sizeof *w);
	if (!owner || !c->cfg->prep_enabled)
		return 1;
	char name[64];
	if (sbx_wsprep_name(ns, owner, c->cfg, name, sizeof name) < 0) {
		snprintf(w->why, sizeof w->why, "the workspace folders of owner %.64s cannot be prepared", owner);
		w->report = 1;
		return -1;
	}
	/* The name covers the namespace: it alone keys the sets. */
	if (sbx_strset_has(c->prepared, name))
		return 1;
	w->delay_ms = REPORT_MS;
	snprintf(w->why, sizeof w->why, "waiting for pod %s to prepare the workspace folders of owner %s", name, owner);
	if (!c->prep_pods || !informer_wait_synced(c->prep_pods, 0)) {
		w->delay_ms = REQUEUE_WAIT_MS;
		return 0;
	}
	/* Parked before looking, so no event between the look and the park
	 * is missed; unparked again when it goes on by itself. */
	park(c, name, kind, queue_key, owner, 1);
	cJSON *pod = informer_get(c->prep_pods, ns, name);
	if (!pod) {
		/* One worker creates it (held CREATING_MS, or until its watch
		 * event); the others wait for it. The first Sandboxes of an
		 * owner come in a burst: the claim is one step, and the cache is
		 * read again under it, since the pod's event (which ends the
		 * claim of the worker that made it) may have come after this
		 * worker's look. Otherwise workers that looked at once each
		 * create it (answered 409). */
		fault_delay("prep-look"); /* tests: workers that looked at once */
		if (!sbx_strset_claim_for(c->prep_looked, name, CREATING_MS))
			return 0;
		pod = informer_get(c->prep_pods, ns, name);
		if (pod)
			sbx_strset_del(c->prep_looked, name); /* made meanwhile: its event came */
	}
	if (!pod) {
		if (create_prep(c, ns, owner, name, forobj, w) == 0)
			return 0;
		sbx_strset_del(c->prep_looked, name);
		/* Refused: the others try (and say why) for themselves, each
		 * with its own backoff; this one backs off. */
		park(c, name, kind, queue_key, owner, 0);
		wake(c, name);
		w->report = 1;
		return -1;
	}
	char state[512];
	enum sbx_wsprep_state st = sbx_wsprep_state(pod, ns, owner, c->cfg, state, sizeof state);
	time_t created = 0;
	ktime_parse_rfc3339(meta_str(pod, "creationTimestamp"), &created);
	double age_ms = created ? difftime(time(NULL), created) * 1000 : 0;
	int r = 0;
	switch (st) {
	case SBX_WSPREP_DONE:
		sbx_strset_add_for(c->prepared, name, PREPARED_MS);
		park(c, name, kind, queue_key, owner, 0);
		r = 1;
		break;
	case SBX_WSPREP_FOREIGN:
		snprintf(w->why, sizeof w->why, "the workspace folders of owner %s are not prepared: %s", owner, state);
		park(c, name, kind, queue_key, owner, 0);
		w->report = 1;
		r = -1;
		break;
	case SBX_WSPREP_FAILED:
	case SBX_WSPREP_WAITING:
		if (st == SBX_WSPREP_WAITING && age_ms <= (SBX_WSPREP_DEADLINE_S + 60) * 1000.0) {
			snprintf(w->why, sizeof w->why, "waiting for pod %s to prepare the workspace folders of owner %s: %s",
				 name, owner, state);
			w->report = age_ms >= REPORT_MS;
			w->delay_ms = age_ms < REPORT_MS - 1000 ? (long)(REPORT_MS - age_ms) : REPORT_MS;
			break; /* parked */
		}
		park(c, name, kind, queue_key, owner, 0);
		snprintf(w->why, sizeof w->why,
			 "pod %s, which prepares the workspace folders of owner %s, %s: %s; making it again", name, owner,
			 st == SBX_WSPREP_FAILED ? "failed" : "did not finish in time", state);
		log_kv(LOG_WARN, "workspace preparation failed", "namespace", ns, "owner", owner, "pod", name, "reason",
		       state);
		if (!meta_str(pod, "deletionTimestamp"))
			sbx_rc_delete_pod(c, ns, pod);
		w->report = 1;
		r = -1;
		break;
	}
	cJSON_Delete(pod);
	return r;
}

int sbx_rc_workspace_ready(struct sbx_controller *c, struct sbx_view *v, int *r)
{
	struct sbx_ws_wait w;
	char key[600];
	snprintf(key, sizeof key, "%s/%s", v->ns, v->name);
	const struct sbx_wsprep_for me = { SBX_API, "Sandbox", v->name, v->uid };
	int ok = sbx_ws_prepared(c, v->ns, v->owner, &me, SBX_WORK_SANDBOX, key, &w);
	if (ok == 1)
		return 1;
	if (w.report && sbx_rc_report_unbound(c, v, "Pending", "Waiting", w.why, NULL) < 0)
		ok = -1;
	v->retry_after_ms = w.retry_after_ms;
	*r = ok < 0 ? -1 : (int)w.delay_ms;
	return 0;
}
