/* The controller's side of the workspace preparation (sandbox/wsprep.h):
 * before a pod of an owner is created (cold, resumed, warm), the owner's
 * preparation pod in that namespace has Succeeded. Waiting costs no request:
 * the preparation pods are watched, and a waiting work queue item is parked
 * until its pod is done, failed or gone. */
#ifndef SBX_RECONCILE_WSGATE_H
#define SBX_RECONCILE_WSGATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "reconcile/view.h"

struct kube_client;
struct sbx_controller;
struct sbx_wsprep_for;

/* Where an owner's folders are in their preparation. */
struct sbx_ws_wait {
	char why[768];	     /* for the Sandbox (or pool) while they are not ready */
	int report;	     /* 1: worth a status write (slow, failed, refused) */
	long delay_ms;	     /* with 0: look again then */
	long retry_after_ms; /* with -1: the API's Retry-After */
};

/* Whether owner's folders in ns are prepared: 1 (also without owner, or with
 * workspace.prepare off), 0 while the preparation pod runs (made here when
 * missing, owned by forobj; the work queue's item kind/queue_key (NULL:
 * none) is queued again when it is done, failed or gone), -1 when its create
 * was refused or it failed (retry with backoff); w says why. Reads the
 * preparation pods' cache: no request while it waits. */
int sbx_ws_prepared(struct sbx_controller *c, const char *ns, const char *owner, const struct sbx_wsprep_for *forobj,
		    int kind, const char *queue_key, struct sbx_ws_wait *w);
/* sbx_ws_prepared for v's owner before a pod of v is created: 1, or 0 with
 * Waiting reported when w says it is worth it and *r the reconcile's result
 * (a delay, or -1). */
int sbx_rc_workspace_ready(struct sbx_controller *c, struct sbx_view *v, int *r);

/* The set of work queue items waiting for a preparation pod (caller frees
 * with sbx_ws_waiters_free; NULL is a no-op there). */
struct sbx_ws_waiters *sbx_ws_waiters_new(void);
void sbx_ws_waiters_free(struct sbx_ws_waiters *w);
/* A preparation pod (trimmed) was added, changed or (deleted 1) removed:
 * the items waiting for it are queued when it is done, failed or gone. */
void sbx_ws_on_prep_pod(struct sbx_controller *c, const cJSON *pod, int deleted);

/* The image workspace preparation pods run when the config names none:
 * the controller's own (before start). */
void sbx_controller_set_prep_image(struct sbx_controller *c, const char *image);
/* The image the controller's own pods run (preparation, network probe):
 * the config's, else the controller's own, else the default (borrowed). */
const char *sbx_controller_prep_image(const struct sbx_controller *c);
/* Reads the controller's own image from its pod (POD_NAMESPACE, POD_NAME,
 * the container named "manager" or the first) into out. Returns 0, or -1
 * with why in err. */
int sbx_controller_own_image(struct kube_client *kc, char *out, size_t n, char *err, size_t errlen);

#endif
