/* Whether the cluster enforces NetworkPolicy (contract section 9, issue 24
 * item 4), on ingress and on egress, found out by a probe, never assumed.
 * One round, in the probe namespace (network.verifyNamespace):
 *
 *   1. the policy sbx-netprobe selects the probe's target pod and lets in
 *      SBX_NETPROBE_OPEN and SBX_NETPROBE_SHUT_OUT only; the policy
 *      sbx-netprobe-egress selects the client pod and lets out, to the
 *      target pods, SBX_NETPROBE_SHUT_IN and SBX_NETPROBE_OPEN only. So OPEN
 *      is allowed both ways, SHUT_IN is denied by the target's ingress alone
 *      and SHUT_OUT by the client's egress alone: each shut port proves one
 *      direction (the floor is mostly an egress deny, so ingress alone
 *      proves too little). Two policies, not one selecting both pods for
 *      both directions: kube-router runs a policy's ingress and egress rules
 *      as one chain for every pod it selects, so between two pods of one
 *      policy either rule lets a connection through both ways and the
 *      probe would read "not enforced" on a cluster that enforces both;
 *   2. the target pod sbx-netprobe-target-<round> listens on all three;
 *   3. the client pod sbx-netprobe-client-<round> connects to the target's
 *      address on the three, once a second for SBX_NETPROBE_TRY_S, and exits
 *      0 once the open port answers while neither shut one does (enforced);
 *      when the open one answered but a shut one still did at the end:
 *      SBX_NETPROBE_EXIT_INGRESS (SHUT_IN answered: ingress not enforced),
 *      SBX_NETPROBE_EXIT_EGRESS (SHUT_OUT answered: egress not enforced),
 *      SBX_NETPROBE_EXIT_OPEN (both: neither enforced);
 *      SBX_NETPROBE_EXIT_NONET when the open port never answered (no
 *      verdict: the pods cannot talk at all);
 *   4. both pods are deleted.
 *
 * Both pods run the controller's own image (its `net-probe` subcommand, here)
 * as non-root with nothing added, where sandbox pods run (the config's node
 * selector, tolerations and runtime class). Pure but for the subcommand; the
 * controller runs the rounds (reconcile/netverify.c). */
#ifndef SBX_SANDBOX_NETPROBE_H
#define SBX_SANDBOX_NETPROBE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"

#define SBX_NETPROBE_POLICY "sbx-netprobe"		 /* ingress, the target */
#define SBX_NETPROBE_EGRESS_POLICY "sbx-netprobe-egress" /* egress, the client */
#define SBX_NETPROBE_PREFIX "sbx-netprobe-"
/* The label of the probe's pods: "target" or "client". */
#define SBX_LABEL_NETPROBE "sandbox.dev/netprobe"
#define SBX_NETPROBE_OPEN 8081	   /* allowed on ingress and on egress */
#define SBX_NETPROBE_SHUT_IN 8080  /* denied by ingress alone */
#define SBX_NETPROBE_SHUT_OUT 8082 /* denied by egress alone */
#define SBX_NETPROBE_TRY_S 10
#define SBX_NETPROBE_EXIT_OPEN 3 /* both shut ports answered */
#define SBX_NETPROBE_EXIT_NONET 4
#define SBX_NETPROBE_EXIT_INGRESS 5 /* SHUT_IN answered, SHUT_OUT did not */
#define SBX_NETPROBE_EXIT_EGRESS 6  /* SHUT_OUT answered, SHUT_IN did not */

/* The directions a policy rule applies to, as bits. */
#define SBX_NETPROBE_INGRESS 1u
#define SBX_NETPROBE_EGRESS 2u

/* What a round found. */
enum sbx_netprobe_result {
	SBX_NETPROBE_UNKNOWN = -1, /* no verdict (yet): see the message */
	SBX_NETPROBE_NOT_ENFORCED = 0,
	SBX_NETPROBE_ENFORCED = 1
};

/* The probe's policies in namespace ns: sbx-netprobe (the target's
 * ingress) and sbx-netprobe-egress (the client's egress). New; caller
 * frees. */
cJSON *sbx_netprobe_policy(const char *ns);
cJSON *sbx_netprobe_egress_policy(const char *ns);
/* The target pod (role "target") or the client pod (role "client", which
 * connects to target_ip) of round (new; caller frees; NULL for a role,
 * round or address it does not know). */
cJSON *sbx_netprobe_pod(const char *ns, const char *role, unsigned long round, const char *target_ip,
			const struct sbx_config *cfg, const char *image);
/* The client pod's verdict from its status: UNKNOWN while it runs (*done
 * 0), else the result and why, in words, in why (size n); a NOT_ENFORCED
 * verdict's words name the direction(s) not enforced. */
enum sbx_netprobe_result sbx_netprobe_verdict(const cJSON *client, int *done, char *why, size_t n);
/* The directions (SBX_NETPROBE_INGRESS, _EGRESS bits) the client pod found
 * not enforced: 0 unless its verdict is NOT_ENFORCED. */
unsigned sbx_netprobe_unenforced(const cJSON *client);

/* `sandbox-controller net-probe listen PORT...` and `net-probe connect IP
 * SHUT_IN SHUT_OUT OPEN SECONDS`; argv[0] is "net-probe". Returns the exit
 * code. */
int sbx_netprobe_main(int argc, char **argv);

#endif
