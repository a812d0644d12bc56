/* Allow profiles (contract section 9, issue 24 item 2): cluster-scoped
 * SandboxNetworkProfiles the operator names, each a list of egress CIDRs and
 * ports; a Sandbox names the ones it wants in spec.network.profiles (part of
 * its spec fingerprint), and naming one needs `use` on it, checked at
 * admission (webhook/sandbox_admission.h) and recorded like an owner's
 * authorization (sandbox/authz.h) in sandbox.dev/network-authorization.
 *
 * The pods of a Sandbox with profiles carry the label
 * sandbox.dev/network-profiles: <hash of the sorted names> and the
 * annotation sandbox.dev/network-profiles: <the sorted names, by ",">. Per
 * namespace and set of profiles the controller keeps one NetworkPolicy,
 * sandbox-profiles-<hash>, selecting those pods and allowing egress to the
 * profiles' CIDRs and ports, each CIDR with `except` blocks that carve out
 * every range of the floor it contains (169.254.0.0/16, 100.64.0.0/10,
 * fc00::/7, fe80::/10, network.clusterCIDRs, the API server's Service
 * address and endpoints); a CIDR inside a floor range is left out whole. So
 * a profile can never lift the floor, 0.0.0.0/0 included. Domain names are
 * not supported: NetworkPolicy has none (the CRD refuses anything but a
 * CIDR).
 *
 * Pure: names, the set's hash, the floor's ranges and the policy. The
 * controller keeps the policies (reconcile/netkeep.c). */
#ifndef SBX_SANDBOX_NETPROFILE_H
#define SBX_SANDBOX_NETPROFILE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "base/cidr.h"
#include "sandbox/config.h"
#include "sandbox/netfloor.h"
#include "sandbox/podbuild.h"
#include "sandbox/spec.h"

#define SBX_PROFILE_KIND "SandboxNetworkProfile"
#define SBX_PROFILE_PLURAL "sandboxnetworkprofiles"
/* Most egress entries of a profile and most ports of an entry (the CRD's
 * limits; SBX_PROFILES_MAX and SBX_PROFILE_NAME_MAX are in sandbox/spec.h). */
#define SBX_PROFILE_RULES_MAX 32
#define SBX_PROFILE_PORTS_MAX 16
/* The record of the `use` authorization (sandbox/authz.h's format, with
 * owner "network-profiles:<joined>"). */
#define SBX_ANN_NET_AUTHZ "sandbox.dev/network-authorization"
#define SBX_NETPROFILE_AUTHZ_PREFIX "network-profiles:"
#define SBX_NETPROFILE_POLICY_PREFIX "sandbox-profiles-"
/* Most floor ranges: the fixed four, the cluster's, the API server's. */
#define SBX_NETPROFILE_FLOOR_MAX 96

/* The floor's ranges a profile never grants: sbx_netfloor_never, the
 * config's clusterCIDRs and api[0..napi) (addresses or CIDRs of the API
 * server; unparsable ones skipped). Writes at most max into out; returns the
 * number written. */
size_t sbx_netprofile_floor(const struct sbx_net_settings *n, const char *const *api, size_t napi,
			    struct sbx_cidr *out, size_t max);

/* Checks a profile object's spec (the CRD's rules, again: the controller
 * renders nothing it did not check): egress a list of at most
 * SBX_PROFILE_RULES_MAX {cidr, ports}, cidr as sbx_cidr_ok, ports at most
 * SBX_PROFILE_PORTS_MAX {protocol TCP|UDP, port 1..65535, endPort port..65535}.
 * Returns 0, or -1 with a message. */
int sbx_netprofile_check(const cJSON *profile, char *msg, size_t msglen);

/* The policy name of a set: sandbox-profiles-<hash> into out (64 bytes). */
void sbx_netprofile_policy_name(const char *hash, char out[64]);

/* Returns a new NetworkPolicy (caller frees) for the set (joined, hash) in
 * namespace ns, allowing egress to what profiles[0..nprofiles) grant (those
 * failing sbx_netprofile_check grant nothing), every CIDR with the floor
 * ranges floor[0..nfloor) it strictly contains as `except`, and a CIDR
 * inside one of them left out. */
cJSON *sbx_netprofile_policy(const char *ns, const char *joined, const char *hash, const cJSON *const *profiles,
			     size_t nprofiles, const struct sbx_cidr *floor, size_t nfloor);

/* The informer's copy of a profile: name, uid, resourceVersion and spec
 * when it passes sbx_netprofile_check (else an empty spec: it grants
 * nothing). New; caller frees. */
cJSON *sbx_netprofile_trim(const cJSON *obj);

#endif
