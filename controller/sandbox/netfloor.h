/* The network floor of every sandbox pod (contract section 9, issue 24):
 * one NetworkPolicy per namespace that has sandbox pods, kept by the
 * controller. It selects every pod the controller runs for a sandbox (cold,
 * warm, resumed, and its folder preparations: labels managed-by
 * sandbox-controller and name sandbox or sandbox-workspace-init) and, being
 * a policy of both types, denies what no policy allows:
 *
 *   ingress  only from the sources the operator names (network.ingressFrom);
 *   egress   only to the cluster's DNS resolver on port 53, UDP and TCP
 *            (network.dns; default: the kube-dns pods of kube-system).
 *
 * NetworkPolicy only ever adds what is allowed, so the floor holds as long as
 * no other policy selects these pods with an allow rule: the admission policy
 * sandbox-controller-network refuses a tenant's (manifests/webhook).
 *
 * Pure: the policy's name, shape and whether a stored one is as rendered. The controller keeps it
 * (reconcile/netkeep.c). */
#ifndef SBX_SANDBOX_NETFLOOR_H
#define SBX_SANDBOX_NETFLOOR_H

#include <cjson/cJSON.h>

#include "sandbox/config.h"

/* The floor policy's name in each namespace, and its label (value "true";
 * "profiles" on a profile policy, sandbox/netprofile.h), reserved to the
 * controller: its informer watches by it. */
#define SBX_NETFLOOR_NAME "sandbox-floor"
#define SBX_LABEL_NETFLOOR "sandbox.dev/network-floor"
#define SBX_NETFLOOR_PROFILES "profiles"
/* Largest spec of a labelled policy the informer keeps (bytes of JSON). */
#define SBX_NETFLOOR_SPEC_MAX 16384

/* Ranges no sandbox pod may ever reach (contract section 9), whatever a
 * profile grants: link-local (cloud metadata), shared address space (one
 * cloud's metadata at 100.100.100.200), IPv6 unique-local and link-local. */
extern const char *const sbx_netfloor_never[];

/* Returns a new NetworkPolicy (caller frees) for namespace ns from the
 * config's network settings. */
cJSON *sbx_netfloor_policy(const char *ns, const struct sbx_net_settings *n);

/* Returns 1 iff the stored policy have (NULL ok: 0) carries want's labels and
 * spec unchanged: otherwise the controller writes want over it. */
int sbx_netfloor_as_rendered(const cJSON *have, const cJSON *want);

/* The informer's copy of a policy (the floor's or a set of profiles',
 * sandbox/netprofile.h): name, namespace, uid, resourceVersion,
 * deletionTimestamp, the labels the keeper reads and spec; a spec over
 * SBX_NETFLOOR_SPEC_MAX as its SHA-256 alone, which sbx_netfloor_as_rendered
 * compares (new; caller frees). */
cJSON *sbx_netfloor_trim(const cJSON *obj);

#endif
