#include "webhook/pod_admission.h"

#include <stdio.h>
#include <string.h>

static int is_gated(const char *sub)
{
	return sub && (!strcmp(sub, "exec") || !strcmp(sub, "attach") || !strcmp(sub, "portforward"));
}

/* The verb a refusal names: exec, attach, port-forward. */
static const char *verb_of(const char *sub)
{
	return !strcmp(sub, "portforward") ? "port-forward to" : !strcmp(sub, "attach") ? "attach to"
											: "exec into";
}

void wh_pod_connect(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now, struct wh_verdict *v)
{
	(void)now;
	wh_verdict_allow(v);
	if (!r->operation || strcmp(r->operation, "CONNECT") || !r->resource || strcmp(r->resource, "pods") ||
	    !is_gated(r->subresource) || !r->ns || !r->name || strncmp(r->name, "sbx-", 4))
		return; /* not a sandbox pod's stream: not this gate's to decide */
	if (p->owner_authz == SBX_OWNER_AUTHZ_NAMESPACE)
		return;
	char owner[128] = "", why[256] = "";
	int found = p->pod_owner ? p->pod_owner(p->ctx, r->ns, r->name, owner, sizeof owner) : -1;
	if (found < 0) {
		wh_verdict_deny(v, 500, "InternalError",
				"cannot read sandbox pod %s/%.64s to check who may %s it; retry", r->ns, r->name,
				verb_of(r->subresource));
		return;
	}
	if (!found || !owner[0])
		return; /* no such pod (the stream fails anyway), or no workspace in it */
	if (wh_identity_check(r->user_info, why, sizeof why) < 0) {
		wh_verdict_deny(v, 403, "Forbidden", "cannot check whether this identity may use workspace owner \"%s\": %s",
				owner, why);
		return;
	}
	int ok = p->may_use_owner(p->ctx, r->user_info, r->ns, owner, why, sizeof why);
	char uq[200];
	wh_quote(r->username, uq, sizeof uq);
	if (ok < 0) {
		wh_verdict_deny(v, 500, "InternalError", "cannot check whether %s may use workspace owner \"%s\": %s", uq,
				owner, why);
		return;
	}
	if (!ok)
		wh_verdict_deny(v, 403, "Forbidden",
				"%s may not %s sandbox pod %.64s of workspace owner \"%s\" in namespace %s: missing "
				"permission \"use\" on workspaces.sandbox.dev \"%s\" (RBAC: apiGroups [sandbox.dev], "
				"resources [workspaces], resourceNames [%s], verbs [use]); pods/%s alone does not give it",
				uq, verb_of(r->subresource), r->name, owner, r->ns, owner, owner, r->subresource);
}
