/* The exec gate (contract section 6): CONNECT on pods/exec, pods/attach,
 * pods/portforward and pods/proxy of a sandbox pod (a name beginning "sbx-";
 * for pods/proxy the API server passes "[scheme:]name[:port]") whose pod
 * names a workspace owner is allowed only for identities that may `use`
 * that owner (the SubjectAccessReview of a creation), refused with a
 * message naming the owner and the missing permission otherwise. RBAC's
 * pods/exec and pods/proxy alone cannot tell one owner's sandbox from
 * another's. It fails closed for sandbox pods (the pod cannot be read, the
 * authorizer cannot be asked: refused; an sbx- pod the controller does not
 * know, such as an invented name, is refused without an API call) and never
 * decides about other pods (allowed; the webhook configuration sends it only
 * sbx- names). With ownerAuthorization namespace every identity of the
 * namespace may use its owners, so RBAC alone decides. */
#ifndef SBX_WEBHOOK_POD_ADMISSION_H
#define SBX_WEBHOOK_POD_ADMISSION_H

#include <time.h>

#include "webhook/admission.h"
#include "webhook/sandbox_admission.h"

/* Decides a CONNECT review of a pod subresource; fills v. */
void wh_pod_connect(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now, struct wh_verdict *v);

#endif
