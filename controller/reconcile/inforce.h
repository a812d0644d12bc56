/* Whether the mutating webhook was in force (contract section 2a): an owner
 * authorization record counts only when the API server's own admission call
 * made it, so the controller mounts an owner only for a Sandbox whose
 * creation (or resume) the product's MutatingWebhookConfiguration covered:
 *
 *   - the configuration exists and is not being deleted;
 *   - its webhook (mutate.sandboxes.sandbox.dev) fails closed
 *     (failurePolicy Fail);
 *   - a rule sends that operation (CREATE, or UPDATE for a resume) of
 *     sandbox.dev/v1alpha1 sandboxes to it;
 *   - no objectSelector (labels are the tenant's to set), and every
 *     matchCondition is of the form "request.operation != 'UPDATE' || ...",
 *     with no ternary outside brackets and strings after it (CEL's ?: binds
 *     looser than ||), which can never leave out a CREATE, and for an
 *     UPDATE exactly the
 *     product's "request.operation != 'UPDATE' ||
 *     !has(object.metadata.deletionTimestamp)", which leaves out only an
 *     object being deleted (never resumed);
 *   - its namespaceSelector selects the namespace, judged on the one label
 *     the API server sets and no tenant can change,
 *     kubernetes.io/metadata.name (a selector on any other label cannot be
 *     judged here and counts as not covering);
 *   - and all that held since before the Sandbox was created, with
 *     SBX_INFORCE_GRACE_S to spare for the API server to load a change.
 *
 * "Since" is the later of the configuration's creationTimestamp and the last
 * time a field manager changed anything of the webhook but its caBundle
 * (managedFields), and, while the controller runs, the moment it saw such a
 * change. A caBundle rotation is not a change of what is enforced. */
#ifndef SBX_RECONCILE_INFORCE_H
#define SBX_RECONCILE_INFORCE_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

/* The webhook of the product's MutatingWebhookConfiguration. */
#define SBX_MUTATING_WEBHOOK "mutate.sandboxes.sandbox.dev"
/* How long the API server may take to act on a changed configuration. */
#define SBX_INFORCE_GRACE_S 5
/* The member sbx_inforce_trim adds: when the enforced part last changed (RFC 3339). */
#define SBX_INFORCE_SINCE "enforcedSince"

/* The informer's trimmer for MutatingWebhookConfigurations: name, uid,
 * resourceVersion, creation and deletion timestamps, the webhooks without
 * their caBundle, and SBX_INFORCE_SINCE computed from managedFields. Returns
 * a new object (caller frees); never NULL. */
cJSON *sbx_inforce_trim(const cJSON *mwc);

/* Whether the trimmed configuration mwc (NULL: absent) sends operation
 * ("CREATE" or "UPDATE") of resource ("sandboxes", "sandboxwarmpools") in
 * namespace ns to webhook, failing closed. Returns 1 with *since (when the
 * enforced part last changed), or 0 with the reason in why. Pure. */
int sbx_inforce_eval(const cJSON *mwc, const char *webhook, const char *resource, const char *operation,
		     const char *ns, time_t *since, char *why, size_t whylen);

/* What the controller saw change while it ran (thread-safe). */
struct sbx_inforce;

/* Returns a new tracker (caller frees with sbx_inforce_free). */
struct sbx_inforce *sbx_inforce_new(void);
void sbx_inforce_free(struct sbx_inforce *g);
/* The informer saw old become now (either NULL: added or deleted) at `at`:
 * when the enforced part differs, nothing made before `at` counts. */
void sbx_inforce_observe(struct sbx_inforce *g, const cJSON *old, const cJSON *now, time_t at);
/* 1 when mwc enforces operation for ns now and has since before
 * `made` - SBX_INFORCE_GRACE_S (made: the Sandbox's creationTimestamp, or
 * the issue time of a resume's record); else 0 with why. */
int sbx_inforce_check(struct sbx_inforce *g, const cJSON *mwc, const char *webhook, const char *resource,
		      const char *operation, const char *ns, time_t made, char *why, size_t whylen);

#endif
