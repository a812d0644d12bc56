#include "reconcile/netverify.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/xmalloc.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "kube/workqueue.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/state.h"
#include "sandbox/netprobe.h"
#include "sandbox/podbuild.h"

/* How long a probe pod may take to run (image present, scheduled). */
#define RUN_WAIT_S 60

struct sbx_netverify {
	struct sbx_controller *c;
	pthread_mutex_t mu; /* guards result and why; with wake, stop */
	pthread_cond_t wake;
	int stop;
	int result; /* enum sbx_netprobe_result */
	char why[400];
	int rounds; /* finished so far */
	pthread_t thread;
	struct obs_metric *enforced, *verifications, *directions;
	char image[512]; /* the probe pods' */
};

static const char *probe_ns(const struct sbx_controller *c)
{
	const char *env = getenv("POD_NAMESPACE");
	return c->cfg->net.verify_ns ? c->cfg->net.verify_ns : env && *env ? env
									   : "sandbox-system";
}

/* Sleeps up to secs; 1 when asked to stop. */
static int nap(struct sbx_netverify *v, long secs)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	pthread_mutex_lock(&v->mu);
	while (!v->stop && pthread_cond_timedwait(&v->wake, &v->mu, &until) == 0)
		;
	int stop = v->stop;
	pthread_mutex_unlock(&v->mu);
	return stop;
}

static void pod_path(char *out, size_t n, const char *ns, const char *name)
{
	snprintf(out, n, "/api/v1/namespaces/%s/pods%s%s", ns, name ? "/" : "", name ? name : "");
}

struct probe_pods {
	struct sbx_netverify *v;
	const char *ns;
};

/* kube_list callback: deletes one probe pod by name. */
static void delete_one(void *ctx, const cJSON *pod)
{
	struct probe_pods *p = ctx;
	const char *name = meta_str(pod, "name");
	char path[512];
	if (!name || strncmp(name, SBX_NETPROBE_PREFIX, sizeof SBX_NETPROBE_PREFIX - 1) || strlen(name) > 253)
		return;
	pod_path(path, sizeof path, p->ns, name);
	kube_request(p->v->c->kc, "DELETE", path, NULL, NULL, NULL, NULL, NULL);
}

/* Deletes every probe pod in ns (this round's or a crashed process's). */
static void delete_probe_pods(struct sbx_netverify *v, const char *ns)
{
	char path[512];
	struct probe_pods p = { v, ns };
	pod_path(path, sizeof path, ns, NULL);
	kube_list(v->c->kc, path, SBX_LABEL_NETPROBE, delete_one, &p, NULL, NULL);
}

/* POSTs obj (freed here), what in words, to path: 0 when made or there. */
static int post(struct sbx_netverify *v, const char *path, cJSON *obj, const char *what, char *why, size_t n)
{
	char *body = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	struct kube_error err;
	enum kube_err e = kube_request(v->c->kc, "POST", path, NULL, body, NULL, NULL, &err);
	free(body);
	if (e == KUBE_OK || e == KUBE_ERR_ALREADY_EXISTS)
		return 0;
	snprintf(why, n, "cannot create %s: %.300s", what, err.message);
	return -1;
}

/* Makes the probe's policy want (freed here) in ns, or rewrites one of its
 * name in another shape: an older controller's sbx-netprobe lets in 8081
 * alone, so kept it would deny the egress port on ingress and read
 * "enforced" on a cluster that enforces no egress rule. 0 when it is there
 * as built, else -1 with why (a tenant's of that name, without the
 * managed-by label, is not rewritten: network-confinement-policy.yaml). */
static int ensure_policy(struct sbx_netverify *v, const char *ns, cJSON *want, char *why, size_t n)
{
	char path[512];
	const char *name = jstr(jobj(want, "metadata"), "name");
	snprintf(path, sizeof path, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies", ns);
	char *body = cJSON_PrintUnformatted(want);
	struct kube_error err;
	enum kube_err e = kube_request(v->c->kc, "POST", path, NULL, body, NULL, NULL, &err);
	free(body);
	if (e == KUBE_ERR_ALREADY_EXISTS) {
		cJSON *have = NULL;
		size_t len = strlen(path);
		snprintf(path + len, sizeof path - len, "/%s", name);
		e = kube_request(v->c->kc, "GET", path, NULL, NULL, NULL, &have, &err);
		const char *mb = jstr(jobj(jobj(have, "metadata"), "labels"), SBX_LABEL_MANAGED_BY);
		const char *rv = jstr(jobj(have, "metadata"), "resourceVersion");
		if (e == KUBE_OK && mb && !strcmp(mb, SBX_MANAGED_BY) &&
		    cJSON_Compare(jobj(have, "spec"), jobj(want, "spec"), 1)) {
			e = KUBE_OK;
		} else if (e == KUBE_OK) {
			if (rv)
				cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(want, "metadata"), "resourceVersion", rv);
			body = cJSON_PrintUnformatted(want);
			e = kube_request(v->c->kc, "PUT", path, NULL, body, NULL, NULL, &err);
			free(body);
			if (e == KUBE_OK)
				log_kv(LOG_INFO, "NetworkPolicy probe's policy rewritten in its shape", "name", name, "namespace",
				       ns);
		}
		cJSON_Delete(have);
	}
	if (e != KUBE_OK)
		snprintf(why, n, "cannot create or rewrite the probe's NetworkPolicy %s: %.300s", name, err.message);
	cJSON_Delete(want);
	return e == KUBE_OK ? 0 : -1;
}

/* Polls the pod until done(pod) says so or secs pass; the last copy (caller
 * frees) or NULL. */
static cJSON *await(struct sbx_netverify *v, const char *ns, const char *name, long secs,
		    int (*done)(const cJSON *pod))
{
	char path[512];
	pod_path(path, sizeof path, ns, name);
	cJSON *pod = NULL;
	for (long i = 0; i <= secs; i++) {
		cJSON_Delete(pod);
		pod = NULL;
		kube_request(v->c->kc, "GET", path, NULL, NULL, NULL, &pod, NULL);
		if (pod && done(pod))
			return pod;
		if (nap(v, 1))
			break;
	}
	return pod;
}

static int running_with_ip(const cJSON *pod)
{
	const char *phase = jstr(jobj(pod, "status"), "phase");
	return jstr(jobj(pod, "status"), "podIP") && phase && (!strcmp(phase, "Running") || !strcmp(phase, "Failed"));
}

/* Why pod is not running, in words without its name (so that the same
 * trouble reads the same every round): its container's waiting reason and
 * message (ErrImagePull: no such image), else the scheduler's, else its
 * phase. */
static void not_running(const cJSON *pod, char *out, size_t n)
{
	const cJSON *st = jobj(pod, "status"), *cond;
	const cJSON *wait = jobj(jobj(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "containerStatuses"), 0),
				      "state"),
				 "waiting");
	if (jstr(wait, "reason")) {
		snprintf(out, n, "%.60s: %.200s", jstr(wait, "reason"), jstr(wait, "message") ? jstr(wait, "message") : "");
		return;
	}
	cJSON_ArrayForEach(cond, cJSON_GetObjectItemCaseSensitive(st, "conditions"))
	{
		const char *type = jstr(cond, "type"), *cs = jstr(cond, "status");
		if (type && cs && !strcmp(type, "PodScheduled") && strcmp(cs, "True")) {
			snprintf(out, n, "not scheduled: %.200s", jstr(cond, "message") ? jstr(cond, "message") : "?");
			return;
		}
	}
	snprintf(out, n, "phase %.40s", pod ? (jstr(st, "phase") ? jstr(st, "phase") : "unknown") : "unknown (not read)");
}

static int finished(const cJSON *pod)
{
	int done = 0;
	char why[8];
	sbx_netprobe_verdict(pod, &done, why, sizeof why);
	return done;
}

/* One round: the verdict, why in why, and in *unenforced the directions
 * found not enforced. */
static enum sbx_netprobe_result round_once(struct sbx_netverify *v, char *why, size_t n, unsigned *unenforced)
{
	struct sbx_controller *c = v->c;
	const char *ns = probe_ns(c), *image = v->image;
	unsigned long round = (unsigned long)time(NULL);
	char path[512], name[64];
	enum sbx_netprobe_result r = SBX_NETPROBE_UNKNOWN;
	*unenforced = 0;
	delete_probe_pods(v, ns);
	if (ensure_policy(v, ns, sbx_netprobe_policy(ns), why, n) < 0 ||
	    ensure_policy(v, ns, sbx_netprobe_egress_policy(ns), why, n) < 0)
		return SBX_NETPROBE_UNKNOWN;
	pod_path(path, sizeof path, ns, NULL);
	if (post(v, path, sbx_netprobe_pod(ns, "target", round, NULL, c->cfg, image), "the probe's target pod", why, n) < 0)
		goto out;
	snprintf(name, sizeof name, SBX_NETPROBE_PREFIX "target-%lu", round);
	cJSON *target = await(v, ns, name, RUN_WAIT_S, running_with_ip);
	const char *ip = jstr(jobj(target, "status"), "podIP");
	const char *phase = jstr(jobj(target, "status"), "phase");
	if (!ip || !phase || strcmp(phase, "Running")) {
		char state[300];
		not_running(target, state, sizeof state);
		snprintf(why, n, "the probe's target pod did not run within %d s (image %.120s): %.200s", RUN_WAIT_S, image,
			 state);
		cJSON_Delete(target);
		goto out;
	}
	cJSON *client = sbx_netprobe_pod(ns, "client", round, ip, c->cfg, image);
	cJSON_Delete(target);
	if (post(v, path, client, "the probe's client pod", why, n) < 0)
		goto out;
	snprintf(name, sizeof name, SBX_NETPROBE_PREFIX "client-%lu", round);
	cJSON *cl = await(v, ns, name, RUN_WAIT_S + SBX_NETPROBE_TRY_S, finished);
	int done = 0;
	r = sbx_netprobe_verdict(cl, &done, why, n);
	*unenforced = sbx_netprobe_unenforced(cl);
	if (!done)
		snprintf(why, n, "the probe's client pod did not finish within %d s", RUN_WAIT_S + SBX_NETPROBE_TRY_S);
	cJSON_Delete(cl);
out:
	delete_probe_pods(v, ns);
	return r;
}

/* Queues every Sandbox: their condition changed. */
static void requeue_all(struct sbx_controller *c)
{
	cJSON *all = informer_list(c->sandboxes);
	const cJSON *s;
	cJSON_ArrayForEach(s, all)
	{
		sbx_controller_enqueue(c, SBX_WORK_SANDBOX, meta_str(s, "namespace"), meta_str(s, "name"),
				       jstr(jobj(s, "spec"), "workspaceOwner"), 0);
	}
	cJSON_Delete(all);
}

/* A direction's state by the round's result r and unenforced bits. */
static const char *direction_state(enum sbx_netprobe_result r, unsigned unenforced, unsigned dir, double *value)
{
	if (r == SBX_NETPROBE_UNKNOWN) {
		*value = -1;
		return "unknown";
	}
	*value = (unenforced & dir) ? 0 : 1;
	return (unenforced & dir) ? "not_enforced" : "enforced";
}

static void *verify_main(void *arg)
{
	struct sbx_netverify *v = arg;
	static const char *const names[] = { "unknown", "not_enforced", "enforced" };
	for (;;) {
		char why[400] = "";
		unsigned unenforced = 0;
		enum sbx_netprobe_result r = round_once(v, why, sizeof why, &unenforced);
		/* A NOT_ENFORCED verdict names at least one direction (an exit code it
		 * does not know is no verdict). */
		if (r == SBX_NETPROBE_NOT_ENFORCED && !unenforced)
			unenforced = SBX_NETPROBE_INGRESS | SBX_NETPROBE_EGRESS;
		pthread_mutex_lock(&v->mu);
		/* A new verdict, or new words for it, is news to the Sandboxes (their
		 * condition carries both) and to the log; the same again is neither,
		 * so a probe that cannot run says so once, not every round. The
		 * words never name a round's pods, so they repeat when the trouble
		 * does; they name the direction not enforced. */
		int changed = v->rounds == 0 || v->result != (int)r || strcmp(v->why, why);
		v->result = (int)r;
		snprintf(v->why, sizeof v->why, "%s", why);
		v->rounds++;
		int stop = v->stop;
		pthread_mutex_unlock(&v->mu);
		if (stop)
			break;
		obs_metric_set(v->enforced, NULL, (double)r);
		double in_v, out_v;
		const char *in = direction_state(r, unenforced, SBX_NETPROBE_INGRESS, &in_v);
		const char *out = direction_state(r, unenforced, SBX_NETPROBE_EGRESS, &out_v);
		const char *in_l[] = { "ingress" }, *out_l[] = { "egress" };
		obs_metric_set(v->directions, in_l, in_v);
		obs_metric_set(v->directions, out_l, out_v);
		const char *lv[] = { names[r + 1] };
		obs_metric_add(v->verifications, lv, 1);
		enum log_level level = r == SBX_NETPROBE_ENFORCED ? LOG_INFO : LOG_WARN;
		log_kv(changed ? level : LOG_DEBUG, "NetworkPolicy enforcement probed", "result", names[r + 1], "ingress",
		       in, "egress", out, "why", why, "namespace", probe_ns(v->c));
		if (changed)
			requeue_all(v->c);
		if (nap(v, v->c->cfg->net.verify_interval_s))
			break;
	}
	return NULL;
}

int sbx_netverify_start(struct sbx_controller *c, const char *image)
{
	if (!c->cfg->net.policies || !c->cfg->net.verify)
		return 0;
	struct sbx_netverify *v = xcalloc(1, sizeof *v);
	v->c = c;
	v->result = SBX_NETPROBE_UNKNOWN;
	snprintf(v->image, sizeof v->image, "%s", image);
	snprintf(v->why, sizeof v->why, "not probed yet");
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->wake, NULL);
	v->enforced = obs_gauge("sandbox_network_policy_enforced",
				"Whether the cluster enforces NetworkPolicy, by the last probe: 1 yes, 0 no, -1 not known.",
				NULL);
	v->verifications = obs_counter("sandbox_network_verifications_total", "Probes of NetworkPolicy enforcement, by result.",
				       "result");
	v->directions = obs_gauge("sandbox_network_policy_direction_enforced",
				  "Whether the cluster enforces NetworkPolicy on ingress and on egress, by the last probe: "
				  "1 yes, 0 no, -1 not known.",
				  "direction");
	obs_metric_set(v->enforced, NULL, -1);
	const char *in_l[] = { "ingress" }, *out_l[] = { "egress" };
	obs_metric_set(v->directions, in_l, -1);
	obs_metric_set(v->directions, out_l, -1);
	c->netverify = v;
	if (pthread_create(&v->thread, NULL, verify_main, v) != 0) {
		v->thread = 0;
		return -1;
	}
	return 0;
}

void sbx_netverify_stop(struct sbx_controller *c)
{
	struct sbx_netverify *v = c->netverify;
	if (!v)
		return;
	pthread_mutex_lock(&v->mu);
	v->stop = 1;
	pthread_cond_broadcast(&v->wake);
	pthread_mutex_unlock(&v->mu);
	if (v->thread)
		pthread_join(v->thread, NULL);
	pthread_mutex_destroy(&v->mu);
	pthread_cond_destroy(&v->wake);
	free(v);
	c->netverify = NULL;
}

/* The longest NetworkPolicyEnforced message this controller writes, and keeps. */
#define NETVERIFY_MSG_MAX 440

/* The NetworkPolicyEnforced status and reason of each result, by result + 1. */
static const struct {
	const char *status, *reason;
} verdicts[] = { { "Unknown", "NotVerified" }, { "False", "NotEnforced" }, { "True", "Verified" } };

/* The NetworkPolicyEnforced condition old_status carries, in in, when it
 * is one this controller could have written; 0 when there is none. */
static int keep_old(const cJSON *old_status, struct sbx_status_in *in)
{
	const cJSON *old = sbx_status_condition(old_status, "NetworkPolicyEnforced");
	const char *st = jstr(old, "status"), *reason = jstr(old, "reason"), *message = jstr(old, "message");
	if (!st || !reason || !message || strlen(message) >= NETVERIFY_MSG_MAX)
		return 0;
	for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) {
		if (!strcmp(st, verdicts[i].status) && !strcmp(reason, verdicts[i].reason)) {
			in->net_status = verdicts[i].status;
			in->net_reason = verdicts[i].reason;
			in->net_message = message;
			return 1;
		}
	}
	return 0;
}

void sbx_netverify_condition(struct sbx_controller *c, const cJSON *old_status, struct sbx_status_in *in)
{
	static _Thread_local char msg[NETVERIFY_MSG_MAX];
	struct sbx_netverify *v = c->netverify;
	if (!v)
		return;
	fault_delay("netverify-condition"); /* tests: a shutdown while a worker holds v */
	pthread_mutex_lock(&v->mu);
	int r = v->result, first = !v->rounds;
	if (first)
		snprintf(msg, sizeof msg, "not verified yet: the probe's first round has not finished");
	else if (r == SBX_NETPROBE_UNKNOWN)
		snprintf(msg, sizeof msg, "no verdict: %s", v->why);
	else
		snprintf(msg, sizeof msg, "%s", v->why);
	pthread_mutex_unlock(&v->mu);
	if (first && keep_old(old_status, in))
		return; /* the round's end queues this Sandbox again */
	in->net_status = verdicts[r + 1].status;
	in->net_reason = verdicts[r + 1].reason;
	in->net_message = msg;
}

int sbx_netverify_gate(struct sbx_controller *c, char *why, size_t n)
{
	struct sbx_netverify *v = c->netverify;
	if (!c->cfg->net.require_enforced)
		return 0;
	if (!v) {
		snprintf(why, n, "network.requireEnforced is set but enforcement is not probed (network.verify false)");
		return -1;
	}
	pthread_mutex_lock(&v->mu);
	int r = v->result;
	if (r != SBX_NETPROBE_ENFORCED)
		snprintf(why, n, "network.requireEnforced: NetworkPolicy enforcement is not verified: %s", v->why);
	pthread_mutex_unlock(&v->mu);
	return r == SBX_NETPROBE_ENFORCED ? 0 : -1;
}
