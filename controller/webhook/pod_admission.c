#include "webhook/pod_admission.h"

#include <stdio.h>
#include <string.h>

static int is_gated(const char *sub)
{
	return sub && (!strcmp(sub, "exec") || !strcmp(sub, "attach") || !strcmp(sub, "portforward") ||
		       !strcmp(sub, "proxy"));
}

/* The verb a refusal names: exec, attach, port-forward, proxy. */
static const char *verb_of(const char *sub)
{
	return !strcmp(sub, "portforward") ? "port-forward to"
	       : !strcmp(sub, "attach")	   ? "attach to"
	       : !strcmp(sub, "proxy")	   ? "proxy to"
					   : "exec into";
}

/* The pod a CONNECT names, into out (size n): for pods/proxy the request's
 * name is the API server's "[scheme:]name[:port]" (a pod name holds no ':'),
 * for the others the pod's name. 0, or -1 when it is not of that form. */
static int pod_of_request(const char *name, const char *sub, char *out, size_t n)
{
	const char *start = name, *end = name + strlen(name), *c1 = strchr(name, ':');
	if (!strcmp(sub, "proxy") && c1) {
		const char *c2 = strchr(c1 + 1, ':');
		if (c2 && strchr(c2 + 1, ':'))
			return -1;
		if (c2) { /* scheme:name:port */
			start = c1 + 1;
			end = c2;
		} else { /* name:port */
			end = c1;
		}
	}
	if (end <= start || (size_t)(end - start) >= n)
		return -1;
	memcpy(out, start, (size_t)(end - start));
	out[end - start] = '\0';
	return 0;
}

void wh_pod_connect(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now, struct wh_verdict *v)
{
	(void)now;
	wh_verdict_allow(v);
	char pod[254];
	if (!r->operation || strcmp(r->operation, "CONNECT") || !r->resource || strcmp(r->resource, "pods") ||
	    !is_gated(r->subresource) || !r->ns || !r->name)
		return; /* not a pod's stream: not this gate's to decide */
	if (pod_of_request(r->name, r->subresource, pod, sizeof pod) < 0) {
		/* The API server refuses such a name too; refused here, as it may
		 * hide a sandbox pod's. */
		wh_verdict_deny(v, 400, "BadRequest", "cannot tell which pod %.64s names", r->name);
		return;
	}
	if (strncmp(pod, "sbx-", 4))
		return; /* not a sandbox pod's stream */
	if (p->owner_authz == SBX_OWNER_AUTHZ_NAMESPACE)
		return;
	char owner[128] = "", why[256] = "";
	int found = p->pod_owner ? p->pod_owner(p->ctx, r->ns, pod, owner, sizeof owner) : -1;
	if (found == -2) {
		/* Fails closed: a pod created a moment ago may not be in the
		 * caches yet (its client retries), a name never created is not
		 * worth a read (anyone may send one). */
		wh_verdict_deny(v, 404, "NotFound",
				"sandbox pod %s/%.64s is not known to sandbox-controller (created a moment ago? retry)",
				r->ns, pod);
		return;
	}
	if (found < 0) {
		wh_verdict_deny(v, 500, "InternalError",
				"cannot read sandbox pod %s/%.64s to check who may %s it; retry", r->ns, pod,
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
	int ok = wh_may_use_owner(p, r->user_info, r->ns, owner, why, sizeof why);
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
				uq, verb_of(r->subresource), pod, owner, r->ns, owner, owner, r->subresource);
}
